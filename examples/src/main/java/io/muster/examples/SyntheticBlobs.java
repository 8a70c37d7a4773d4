package io.muster.examples;

import java.util.Random;

/**
 * A classification data set made from a seed, the same on every worker: {@code classes} Gaussian
 * blobs in {@code features} dimensions, close enough to overlap so accuracy stays below 1.
 */
record SyntheticBlobs(float[][] x, int[] y, int features, int classes) implements java.io.Serializable {

  static SyntheticBlobs generate(long seed, int rows, int features, int classes) {
    Random random = new Random(seed);
    float[][] means = new float[classes][features];
    for (float[] mean : means) {
      for (int f = 0; f < features; f++) {
        mean[f] = (float) (random.nextGaussian() * 0.6);
      }
    }
    float[][] x = new float[rows][features];
    int[] y = new int[rows];
    for (int i = 0; i < rows; i++) {
      y[i] = random.nextInt(classes);
      for (int f = 0; f < features; f++) {
        x[i][f] = (float) (means[y[i]][f] + random.nextGaussian());
      }
    }
    return new SyntheticBlobs(x, y, features, classes);
  }

  int rows() {
    return y.length;
  }

  /** Rows {@code from} (inclusive) to {@code to} (exclusive). */
  SyntheticBlobs range(int from, int to) {
    return new SyntheticBlobs(java.util.Arrays.copyOfRange(x, from, to), java.util.Arrays.copyOfRange(y, from, to),
        features, classes);
  }

  /** Every {@code n}-th row starting at {@code id}: TensorFlow's auto-sharding by data. */
  SyntheticBlobs shard(int id, int n) {
    int rows = (rows() - id + n - 1) / n;
    float[][] sx = new float[rows][];
    int[] sy = new int[rows];
    for (int i = 0; i < rows; i++) {
      sx[i] = x[id + i * n];
      sy[i] = y[id + i * n];
    }
    return new SyntheticBlobs(sx, sy, features, classes);
  }
}
