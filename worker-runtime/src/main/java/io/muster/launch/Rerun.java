package io.muster.launch;

import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.stream.Collectors;

/**
 * Which failed attempts run the whole gang again: the one rule of every launcher (Spark's
 * {@code BarrierTrainer} and {@code muster spark-run}, YARN's {@code muster submit}).
 *
 * <p>An exit code from 1 to 128 other than {@link #EX_TEMPFAIL} is the command's own answer (bad
 * data, a bug, a wrong path), which a re-run would repeat. A command killed by a signal (129 and
 * up), a container the cluster took away (YARN's negative exit statuses), a task lost with its
 * host or executor, and a command that exits with {@link #EX_TEMPFAIL} are the cluster's failures
 * (or the command asking for a re-run), which a re-run can heal. A task that fails because another
 * did takes the first failure's verdict.
 *
 * <p>A command's own failure is often the symptom of a cluster's failure that the launcher hears of
 * a moment later (a peer's container killed, its host cut off): the launcher waits
 * {@link #CAUSE_WINDOW} after a command's own failure before it acts, and a cluster's failure that
 * arrives meanwhile is taken for the cause ({@link Attempt}).
 */
public enum Rerun {
  /** Re-run the cluster's failures and a command's {@link #EX_TEMPFAIL}; a command's own failure is final. */
  CLUSTER_FAILURES,
  /** Re-run every failure, a command's own exit code included (TonY's rule). */
  ANY_FAILURE;

  /** The exit code with which a command asks for the gang to be re-run (sysexits' {@code EX_TEMPFAIL}). */
  public static final int EX_TEMPFAIL = 75;
  /** How long a launcher waits, after a command's own failure, for a cluster's failure that caused it. */
  public static final Duration CAUSE_WINDOW = Duration.ofSeconds(3);
  /**
   * Why a command's own failure was not re-run, and how to have it re-run; {@code anyFailure} is
   * the launcher's way to choose {@link #ANY_FAILURE}.
   */
  public static String notRerun(String anyFailure) {
    return "the command's own exit code, which a re-run would repeat; exit with " + EX_TEMPFAIL + ", or run with "
        + anyFailure + ", to have the gang re-run";
  }

  /** Whether {@code exitCode} (non-zero) is the command's own answer rather than the cluster's failure. */
  public static boolean isCommandsOwn(int exitCode) {
    return exitCode > 0 && exitCode <= 128 && exitCode != EX_TEMPFAIL;
  }

  /** The option's value: {@code cluster-failures} or {@code any-failure}. */
  public String optionValue() {
    return name().toLowerCase(Locale.ROOT).replace('_', '-');
  }

  /** The rule an option's value names; a usage error naming {@code option} and its values otherwise. */
  public static Rerun parse(String option, String value) {
    return Arrays.stream(values()).filter(r -> r.optionValue().equals(value)).findFirst()
        .orElseThrow(() -> new IllegalArgumentException(option + " must be one of "
            + Arrays.stream(values()).map(Rerun::optionValue).collect(Collectors.joining(", ")) + ", was '" + value
            + "'"));
  }
}
