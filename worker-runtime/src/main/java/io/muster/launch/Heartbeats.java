package io.muster.launch;

import java.time.Duration;

/**
 * The one set of constants by which a launcher and the members of its gang judge each other's
 * silence, on Spark and on YARN alike. Each side says something at least every {@link #EVERY}; a
 * host that loses power or its link resets nothing, and its connections stay open while nothing
 * arrives. The launcher, which sees every member, is the one to name a lost host: it judges first.
 */
public final class Heartbeats {
  /** How often each side beats. */
  public static final Duration EVERY = Duration.ofSeconds(1);
  /** How long the launcher waits for a word from a running member before it takes its host for lost. */
  public static final Duration MEMBER_SILENT = Duration.ofSeconds(10);
  /**
   * Once another member has failed: a member silent this long (three beats) is taken for the cause,
   * as a peer cut off makes its partners fail before it is timed out.
   */
  public static final Duration MEMBER_SUSPECT = Duration.ofSeconds(3);
  /** How long a member waits for a word from its launcher before it ends its command: longer than {@link #MEMBER_SILENT}. */
  public static final Duration LAUNCHER_SILENT = Duration.ofSeconds(15);
  /** The deadline of a member's call that expects an answer at once. */
  public static final Duration CALL = Duration.ofSeconds(10);

  private Heartbeats() {}
}
