package io.muster.internal.coordination;

import com.google.protobuf.ByteString;
import io.grpc.Status;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.function.Consumer;

/**
 * The coordination service's key-value store with TensorFlow's semantics: keys are normalised
 * ({@code ///a//b/c//} is {@code a/b/c}); a directory is every key under {@code dir/}; deleting a
 * key deletes its directory too; counters are big-endian 8-byte integers starting at 0. A blocking
 * get is a callback completed when the key is inserted, so no thread waits for it.
 */
final class KeyValueStore {

  private final TreeMap<String, ByteString> entries = new TreeMap<>();
  private final Map<String, List<Consumer<ByteString>>> waiters = new LinkedHashMap<>();

  static String normalize(String key) {
    StringBuilder out = new StringBuilder();
    for (String part : key.split("/")) {
      if (!part.isEmpty()) {
        if (out.length() > 0) {
          out.append('/');
        }
        out.append(part);
      }
    }
    return out.toString();
  }

  /** @throws io.grpc.StatusRuntimeException ALREADY_EXISTS when the key exists and overwriting is not allowed */
  void insert(String rawKey, ByteString value, boolean allowOverwrite) {
    String key = normalize(rawKey);
    List<Consumer<ByteString>> ready;
    synchronized (this) {
      if (!allowOverwrite && entries.containsKey(key)) {
        throw Status.ALREADY_EXISTS.withDescription("key " + key + " already exists.").asRuntimeException();
      }
      entries.put(key, value);
      ready = waiters.remove(key);
    }
    if (ready != null) {
      ready.forEach(w -> w.accept(value));
    }
  }

  /**
   * Calls {@code onValue} with the key's value now, or when it is inserted.
   *
   * @return an action that withdraws the wait (for a caller that gave up); a no-op once called
   */
  Runnable get(String rawKey, Consumer<ByteString> onValue) {
    String key = normalize(rawKey);
    ByteString value;
    synchronized (this) {
      value = entries.get(key);
      if (value == null) {
        waiters.computeIfAbsent(key, k -> new ArrayList<>()).add(onValue);
        return () -> {
          synchronized (this) {
            List<Consumer<ByteString>> list = waiters.get(key);
            if (list != null && list.remove(onValue) && list.isEmpty()) {
              waiters.remove(key);
            }
          }
        };
      }
    }
    onValue.accept(value);
    return () -> {};
  }

  synchronized Optional<ByteString> tryGet(String rawKey) {
    return Optional.ofNullable(entries.get(normalize(rawKey)));
  }

  /** Every entry under {@code directory/}, sorted by key. */
  synchronized SortedMap<String, ByteString> getDir(String directory) {
    String prefix = normalize(directory) + "/";
    return new TreeMap<>(entries.subMap(prefix, prefix + Character.MAX_VALUE));
  }

  /** Deletes the key and everything under {@code key/}. */
  synchronized void delete(String rawKey) {
    String key = normalize(rawKey);
    entries.remove(key);
    entries.subMap(key + "/", key + "/" + Character.MAX_VALUE).clear();
  }

  /** Adds to the counter at the key (0 when absent) and returns the new value. */
  long increment(String rawKey, long delta) {
    String key = normalize(rawKey);
    ByteString stored;
    List<Consumer<ByteString>> ready;
    long result;
    synchronized (this) {
      ByteString old = entries.get(key);
      long current = 0;
      if (old != null) {
        if (old.size() != Long.BYTES) {
          throw Status.FAILED_PRECONDITION.withDescription("key " + key + " holds " + old.size()
              + " bytes, not an 8-byte counter").asRuntimeException();
        }
        current = old.asReadOnlyByteBuffer().getLong();
      }
      result = current + delta;
      stored = ByteString.copyFrom(ByteBuffer.allocate(Long.BYTES).putLong(result).flip());
      entries.put(key, stored);
      ready = waiters.remove(key);
    }
    if (ready != null) {
      ready.forEach(w -> w.accept(stored));
    }
    return result;
  }
}
