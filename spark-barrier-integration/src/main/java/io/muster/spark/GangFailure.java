package io.muster.spark;

import io.muster.launch.GangSpec;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What a failed gang run was, in words, from the exception Spark gave the driver: the member that
 * failed first and its error ({@code worker 1: RetryableException: …}), then the indented lines
 * that came with it (a command's stderr tail); no stack frames. Spark's own message says only that
 * a barrier task "finished unsuccessfully", and the task it reports is often a peer that was
 * aborted because of the first one: the abort reason the peers quote ({@code aborted by: worker 1
 * failed: …}), or the first command's story they quote ({@code because the gang failed: worker 1:
 * `false` exited with code 1…}), names the first.
 */
final class GangFailure {
  private static final Pattern ABORTED_BY =
      Pattern.compile("aborted by: ((?:chief|worker|ps|evaluator) \\d+) failed: (?:[a-z_][\\w$]*\\.)*([A-Z][\\w$]*): (.*)");
  private static final Pattern GANG_FAILED =
      Pattern.compile("because the gang failed: ((?:chief|worker|ps|evaluator) \\d+\\b.*)");
  private static final Pattern RESULT_TASK = Pattern.compile("ResultTask\\(\\d+, (\\d+)\\)");
  private static final Pattern EXCEPTION_LINE = Pattern.compile("(?:[a-z_][\\w$]*\\.)+([A-Z][\\w$]*): (.*)");

  private GangFailure() {}

  /** The failure: its first line names the member and the error; indented lines may follow. */
  static String describe(Throwable failure, GangSpec gang) {
    String message = BarrierTrainer.withoutStackFrames(failure.getMessage());
    if (message == null || message.isEmpty()) {
      return failure.toString();
    }
    List<String> lines = message.lines().toList();
    for (int i = 0; i < lines.size(); i++) {
      Matcher exception = EXCEPTION_LINE.matcher(lines.get(i));
      if (!exception.matches()) {
        continue;
      }
      Matcher gangFailed = GANG_FAILED.matcher(exception.group(2));
      if (gangFailed.find()) { // a peer's command ended because of the first failure, whose story it quotes
        return describe(gangFailed.group(1), lines.subList(i + 1, lines.size()));
      }
      String member = null;
      String type = exception.group(1);
      String text = exception.group(2);
      Matcher aborted = ABORTED_BY.matcher(text);
      if (aborted.find()) {
        member = aborted.group(1);
        type = aborted.group(2);
        text = aborted.group(3);
      } else {
        Matcher task = RESULT_TASK.matcher(message);
        if (task.find()) {
          int partition = Integer.parseInt(task.group(1));
          member = partition < gang.size() ? gang.task(partition).toString() : null;
        }
      }
      // a user's failure, or a story a task told in its member's name (a command's exit), needs no type
      boolean story = type.equals(UsersFailureException.class.getSimpleName())
          || member != null && text.startsWith(member + ": ");
      String said = story ? text : type + ": " + text;
      if (member != null && !said.startsWith(member + ":") && !said.startsWith(member + " ")) {
        said = member + ": " + said;
      }
      return describe(said, lines.subList(i + 1, lines.size()));
    }
    return lines.get(0);
  }

  /** {@code first}, then the indented lines at the start of {@code following}. */
  private static String describe(String first, List<String> following) {
    List<String> out = new ArrayList<>(List.of(first));
    following.stream().takeWhile(line -> line.startsWith("  ")).forEach(out::add);
    return String.join("\n", out);
  }
}
