package io.muster.collective;

import java.io.Serializable;
import java.time.Duration;
import java.util.Locale;
import java.util.Optional;

/**
 * TensorFlow's {@code tf.distribute.experimental.CommunicationOptions}.
 *
 * @param implementation AUTO and RING run the ring over TCP; NCCL asked for without a GPU logs a
 *     warning and runs the ring (the NCCL path is not built yet)
 * @param timeout how long a collective may wait on a silent peer before it fails: one that sends
 *     neither data nor the keepalive a live rank sends while busy elsewhere (a frozen process, a
 *     host cut off); a peer that is only slow to call holds the collective up without failing it
 *     (empty: the coordination heartbeat timeout plus 2 s, so that the service names a silent task first)
 * @param bytesPerPack gradients are packed into buffers of about this size before all-reduce;
 *     0 packs everything into one buffer
 */
public record CommunicationOptions(Implementation implementation, Optional<Duration> timeout, long bytesPerPack)
    implements Serializable {

  /** TensorFlow's {@code CommunicationImplementation}. */
  public enum Implementation {
    AUTO,
    RING,
    NCCL;

    /** Upper-cased, as TensorFlow accepts strings. */
    public static Implementation parse(String name) {
      try {
        return valueOf(name.toUpperCase(Locale.ROOT));
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException("implementation must be AUTO, RING or NCCL, was '" + name + "'");
      }
    }
  }

  public static final CommunicationOptions DEFAULTS = new CommunicationOptions(Implementation.AUTO, Optional.empty(), 0);

  public CommunicationOptions {
    if (implementation == null) {
      throw new IllegalArgumentException("implementation must be AUTO, RING or NCCL, was null");
    }
    if (timeout == null || timeout.filter(t -> t.isNegative() || t.isZero()).isPresent()) {
      throw new IllegalArgumentException("timeout must be > 0 when given, was " + timeout);
    }
    if (bytesPerPack < 0) {
      throw new IllegalArgumentException("bytesPerPack must be >= 0, was " + bytesPerPack);
    }
  }

  // Optional is not serializable: the options travel (to Spark's executors, say) as this form.
  private Object writeReplace() {
    return new Serialized(implementation, timeout.orElse(null), bytesPerPack);
  }

  private record Serialized(Implementation implementation, Duration timeout, long bytesPerPack) implements Serializable {
    private Object readResolve() {
      return new CommunicationOptions(implementation, Optional.ofNullable(timeout), bytesPerPack);
    }
  }

  public CommunicationOptions withImplementation(Implementation value) {
    return new CommunicationOptions(value, timeout, bytesPerPack);
  }

  public CommunicationOptions withTimeout(Duration value) {
    return new CommunicationOptions(implementation, Optional.of(value), bytesPerPack);
  }

  public CommunicationOptions withBytesPerPack(long value) {
    return new CommunicationOptions(implementation, timeout, value);
  }
}
