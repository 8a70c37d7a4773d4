package io.muster.coordination;

import java.time.Duration;

/**
 * The job's key-value store on the coordination service, as TensorFlow's {@code insert_key_value}
 * and {@code blocking_get_key_value} reach it: what the collectives publish their ring addresses
 * through and the parameter servers their variables. Every task's coordination agent is one.
 */
public interface KeyValues {

  /**
   * Stores {@code value} at {@code key}.
   *
   * @throws CoordinationException with code ALREADY_EXISTS when the key exists and overwrite is false
   */
  void insert(String key, byte[] value, boolean allowOverwrite);

  /**
   * The value at {@code key}, waiting for another task to insert it.
   *
   * @throws io.muster.rpc.DeadlineExceededException when the key is not inserted within the timeout
   */
  byte[] get(String key, Duration timeout);
}
