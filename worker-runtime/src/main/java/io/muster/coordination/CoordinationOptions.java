package io.muster.coordination;

import java.io.Serializable;
import java.time.Duration;

/**
 * Timing of the coordination service and its agents.
 *
 * @param heartbeatTimeout a task silent for longer is declared failed (TensorFlow: 10 s); agents
 *     send a heartbeat every half of it, as TensorFlow's agent does
 * @param joinTimeout how long a task's join waits for the leader and for every
 *     task to register (TensorFlow waits an hour without a word; Muster 5 minutes, and says who is
 *     missing)
 * @param shutdownBarrierTimeout when positive, tasks shutting down wait for each other this long,
 *     so no task tears down what the others still use; zero disconnects each task on its own
 * @param progressInterval how often a waiting agent logs which tasks it is still waiting for
 */
public record CoordinationOptions(
    Duration heartbeatTimeout, Duration joinTimeout, Duration shutdownBarrierTimeout, Duration progressInterval)
    implements Serializable {

  public static final CoordinationOptions DEFAULTS = new CoordinationOptions(
      Duration.ofSeconds(10), Duration.ofMinutes(5), Duration.ZERO, Duration.ofSeconds(10));

  public CoordinationOptions {
    requirePositive("heartbeatTimeout", heartbeatTimeout);
    requirePositive("joinTimeout", joinTimeout);
    requirePositive("progressInterval", progressInterval);
    if (shutdownBarrierTimeout == null || shutdownBarrierTimeout.isNegative()) {
      throw new IllegalArgumentException("shutdownBarrierTimeout must be >= 0, was " + shutdownBarrierTimeout);
    }
  }

  private static void requirePositive(String name, Duration value) {
    if (value == null || value.isZero() || value.isNegative()) {
      throw new IllegalArgumentException(name + " must be > 0, was " + value);
    }
  }

  /** Half the heartbeat timeout, as in TensorFlow. */
  public Duration heartbeatInterval() {
    return heartbeatTimeout.dividedBy(2);
  }

  public CoordinationOptions withHeartbeatTimeout(Duration timeout) {
    return new CoordinationOptions(timeout, joinTimeout, shutdownBarrierTimeout, progressInterval);
  }

  public CoordinationOptions withJoinTimeout(Duration timeout) {
    return new CoordinationOptions(heartbeatTimeout, timeout, shutdownBarrierTimeout, progressInterval);
  }

  public CoordinationOptions withShutdownBarrierTimeout(Duration timeout) {
    return new CoordinationOptions(heartbeatTimeout, joinTimeout, timeout, progressInterval);
  }

  public CoordinationOptions withProgressInterval(Duration interval) {
    return new CoordinationOptions(heartbeatTimeout, joinTimeout, shutdownBarrierTimeout, interval);
  }
}
