package io.muster.ps;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * How many shards a float32 variable is split into along dimension 0: TensorFlow's
 * {@code tf.distribute.experimental.partitioners} with their rules, and the "div" layout that
 * {@code ParameterServerStrategy} gives the shards (the first {@code rows % k} shards get one row
 * more). Scalars are never split; one shard means no splitting.
 */
@FunctionalInterface
public interface Partitioner {

  /** The number of shards for a variable of this shape (at least 1). */
  int shards(long[] shape);

  /** {@code FixedShardsPartitioner(numShards)}: {@code min(numShards, shape[0])}. */
  static Partitioner fixedShards(int numShards) {
    if (numShards < 1) {
      throw new IllegalArgumentException("numShards must be >= 1, was " + numShards);
    }
    return shape -> (int) Math.max(1, Math.min(numShards, shape[0]));
  }

  /**
   * {@code MinSizePartitioner(minShardBytes, maxShards)}: as many shards as keep each at least
   * {@code minShardBytes}, at most {@code maxShards} and {@code shape[0]}.
   */
  static Partitioner minSize(long minShardBytes, int maxShards) {
    if (minShardBytes < 1) {
      throw new IllegalArgumentException("minShardBytes must be >= 1, was " + minShardBytes);
    }
    if (maxShards < 1) {
      throw new IllegalArgumentException("maxShards must be >= 1, was " + maxShards);
    }
    return shape -> {
      double bytes = (double) HostedVariable.elements(shape) * Float.BYTES;
      long wanted = (long) Math.ceil(bytes / minShardBytes);
      return (int) Math.max(1, Math.min(Math.min(shape[0], maxShards), wanted));
    };
  }

  /** {@code MinSizePartitioner()} with TensorFlow's defaults: 256 KiB, one shard. */
  static Partitioner minSize() {
    return minSize(256 << 10, 1);
  }

  /**
   * {@code MaxSizePartitioner(maxShardBytes, maxShards)}: as few shards as keep each at most
   * {@code maxShardBytes} (at least one row per shard), capped at {@code maxShards} when it is
   * positive (then shards may be larger).
   */
  static Partitioner maxSize(long maxShardBytes, int maxShards) {
    if (maxShardBytes < 1) {
      throw new IllegalArgumentException("maxShardBytes must be >= 1, was " + maxShardBytes);
    }
    if (maxShards < 0) {
      throw new IllegalArgumentException("maxShards must be >= 1 (or 0 for no limit), was " + maxShards);
    }
    return shape -> {
      if (shape[0] == 0) {
        return 1;
      }
      double bytesPerRow = (double) HostedVariable.elements(shape) / shape[0] * Float.BYTES;
      long rowsPerShard = Math.max(1, (long) Math.floor(maxShardBytes / bytesPerRow));
      long shards = (long) Math.ceil((double) shape[0] / rowsPerShard);
      return (int) (maxShards > 0 ? Math.min(maxShards, shards) : shards);
    };
  }

  /** {@code MaxSizePartitioner(maxShardBytes)} without a limit on the number of shards. */
  static Partitioner maxSize(long maxShardBytes) {
    return maxSize(maxShardBytes, 0);
  }

  /**
   * The rows each shard holds when a variable of {@code rows} rows is split into {@code shards}
   * (capped at {@code rows}): {@code [first, count]} pairs, the first {@code rows % k} one row longer.
   */
  static List<long[]> rowRanges(long rows, int shards) {
    if (shards < 1) {
      throw new IllegalArgumentException("a partitioner must give at least 1 shard, gave " + shards);
    }
    int k = (int) Math.max(1, Math.min(shards, rows));
    List<long[]> ranges = new ArrayList<>(k);
    long first = 0;
    for (int i = 0; i < k; i++) {
      long count = rows / k + (i < rows % k ? 1 : 0);
      ranges.add(new long[] {first, count});
      first += count;
    }
    return ranges;
  }

  /** The shape of a shard holding {@code rows} rows of a variable of this shape. */
  static long[] shardShape(long[] shape, long rows) {
    long[] s = Arrays.copyOf(shape, shape.length);
    s[0] = rows;
    return s;
  }
}
