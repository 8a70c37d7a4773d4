package io.muster.launch;

import java.util.ArrayList;
import java.util.List;

/**
 * The attempts of one job, on every launcher: which failed attempt runs the whole gang again, which
 * attempts count against the job's {@code maxAttempts}, and the words the launchers say it in.
 *
 * <p>An attempt that failed for the command's own reason ({@link Attempt.Kind#OWN}) runs again only
 * under {@link Rerun#ANY_FAILURE}; the cluster's failures always do, while attempts are left. An
 * attempt lost to the cluster (a member's host gone silent, its container taken away) or preempted
 * does not count, up to {@link #UNCOUNTED_LIMIT} such attempts, so that a cluster that keeps failing
 * cannot run the job for ever. A gang that was not formed because the cluster gave it no room
 * ({@link Attempt.Kind#NOT_FORMED}) is not run again: it would not fit the next time either.
 * Driven by one launcher thread.
 */
public final class Attempts {
  /** How many attempts that do not count a job may take. */
  public static final int UNCOUNTED_LIMIT = 10;

  private final int maxAttempts;
  private final Rerun rerun;
  private final String notRerun;
  private int number;
  private int counted;
  private int uncounted;
  private int preemptions;
  private int everySaved;
  private final List<String> failures = new ArrayList<>();

  /**
   * @param notRerun why a command's own failure is not re-run, and how to have it re-run, in the
   *     launcher's terms ({@link Rerun#notRerun})
   */
  public Attempts(int maxAttempts, Rerun rerun, String notRerun) {
    if (maxAttempts < 1) {
      throw new IllegalArgumentException("maxAttempts must be >= 1, was " + maxAttempts);
    }
    this.maxAttempts = maxAttempts;
    this.rerun = rerun;
    this.notRerun = notRerun;
  }

  /** What follows an attempt. */
  public sealed interface Next permits RunAgain, Done {}

  /** The gang runs again; {@code line} said how the attempt failed. */
  public record RunAgain(String line) implements Next {
    /** The log line: the failure's first line, and what follows. */
    public String logLine() {
      return line.lines().findFirst().orElse(line) + "; re-running the gang";
    }
  }

  /**
   * The job is over.
   *
   * @param summary every attempt's story, for a report ({@code succeeded on attempt 2 of 3; earlier attempts failed:} …)
   * @param headline how the job ended, in one phrase: {@code succeeded on attempt 2 of 3}, or the last
   *     attempt's failure ({@code failed on attempt 1 of 1: …})
   */
  public record Done(boolean succeeded, String summary, String headline) implements Next {}

  /** Something that ended earlier attempts than this launcher's own (a lost master), for the summary. */
  public void earlier(String line) {
    failures.add(line);
  }

  /** The attempt running now, from 0. */
  public int number() {
    return number;
  }

  /** The attempt running now, in words: {@code attempt 2 of 3}, or {@code attempt 3 (2 of 3 that count)}. */
  public String which() {
    return number == counted ? "attempt " + (number + 1) + " of " + maxAttempts
        : "attempt " + (number + 1) + " (" + (counted + 1) + " of " + maxAttempts + " that count)";
  }

  /** Takes the outcome of the attempt running now, and says what follows. */
  public Next after(Attempt.Outcome outcome) {
    String which = which();
    if (outcome instanceof Attempt.Succeeded) {
      String succeeded = "succeeded on " + which + (preemptions == 0 ? ""
          : " after " + (preemptions == 1 ? "1 preemption" : preemptions + " preemptions")
              + (everySaved == preemptions ? "; every task saved" + (preemptions == 1 ? "" : " each time")
                  : "; every task saved in " + everySaved + " of them"));
      return new Done(true, succeeded + (failures.isEmpty() ? "" : (preemptions == failures.size()
          ? "; earlier attempts were preempted:\n" : "; earlier attempts failed:\n") + String.join("\n", failures)),
          succeeded);
    }
    Attempt.Failed failed = (Attempt.Failed) outcome;
    if (failed.kind() == Attempt.Kind.NOT_FORMED) {
      failures.add(which + ": " + failed.report());
      return new Done(false, String.join("\n", failures), "failed on " + which + ": " + failed.report());
    }
    boolean countsNot = failed.kind() == Attempt.Kind.LOST || failed.kind() == Attempt.Kind.PREEMPTED;
    if (countsNot) {
      uncounted++;
    } else {
      counted++;
    }
    boolean again = failed.kind() != Attempt.Kind.OWN || rerun == Rerun.ANY_FAILURE;
    String why = again || counted >= maxAttempts ? "" : ", not re-run (" + notRerun + ")";
    String uncountedWhy = countsNot ? " (" + failed.lostTo().orElse("lost to the cluster") + "; this attempt does "
        + "not count)" : "";
    if (failed.kind() == Attempt.Kind.PREEMPTED) {
      preemptions++;
      everySaved += failed.everySaved() ? 1 : 0;
      failures.add(which + " preempted: " + failed.report() + " (this attempt does not count)");
    } else {
      failures.add(which + " failed" + why + ": " + failed.report() + uncountedWhy);
    }
    String failedOn = "failed on " + which + why + ": " + failed.report() + uncountedWhy;
    if (!again || counted >= maxAttempts) {
      return new Done(false, String.join("\n", failures), failedOn);
    }
    if (uncounted >= UNCOUNTED_LIMIT) {
      String gaveUp = "; gave up after " + UNCOUNTED_LIMIT + " attempts that do not count (lost to the cluster or "
          + "preempted)";
      return new Done(false, String.join("\n", failures) + gaveUp.replaceFirst("; ", "\n"), failedOn + gaveUp);
    }
    number++;
    return new RunAgain(failures.get(failures.size() - 1));
  }
}
