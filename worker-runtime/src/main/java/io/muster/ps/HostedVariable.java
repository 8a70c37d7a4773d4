package io.muster.ps;

import java.util.Arrays;

/**
 * One variable as its parameter server holds it: float32 values, the optimizer's slots, and an
 * update count. Every operation holds the variable's lock, so each is atomic with respect to the
 * others (two workers' assign-adds both land; a read never sees half an update).
 */
final class HostedVariable {

  private final String name;
  private final long[] shape;
  private final Optimizer optimizer;
  private final float[] values;
  private final int rowLength;
  private float[] slot1;
  private float[] slot2;
  private long iterations;
  private long version;

  HostedVariable(String name, long[] shape, Optimizer optimizer) {
    this.name = name;
    this.shape = shape.clone();
    this.optimizer = optimizer;
    long elements = elements(shape);
    if (elements > Integer.MAX_VALUE - 8) {
      throw new IllegalArgumentException("variable " + name + " of shape " + Arrays.toString(shape) + " has "
          + elements + " elements; a parameter server holds at most 2^31 - 9 per variable: shard it");
    }
    this.values = new float[(int) elements];
    this.rowLength = rowLength(shape);
    switch (optimizer.kind()) {
      case MOMENTUM -> slot1 = new float[values.length];
      case ADAGRAD -> {
        slot1 = new float[values.length];
        Arrays.fill(slot1, optimizer.initialAccumulatorValue());
      }
      case ADAM -> {
        slot1 = new float[values.length];
        slot2 = new float[values.length];
      }
      default -> { }
    }
  }

  static long elements(long[] shape) {
    long n = 1;
    for (long d : shape) {
      if (d < 0) {
        throw new IllegalArgumentException("shape " + Arrays.toString(shape) + " has a negative dimension");
      }
      n = Math.multiplyExact(n, d);
    }
    return n;
  }

  /** The values in one row of dimension 0 (a scalar is one row of one). */
  static int rowLength(long[] shape) {
    return shape.length == 0 ? 1 : shape[0] == 0 ? 0 : (int) (elements(shape) / shape[0]);
  }

  boolean sameKind(long[] otherShape, Optimizer otherOptimizer) {
    return Arrays.equals(shape, otherShape) && optimizer.equals(otherOptimizer);
  }

  long[] shape() {
    return shape.clone();
  }

  Optimizer optimizer() {
    return optimizer;
  }

  int size() {
    return values.length;
  }

  int rowLength() {
    return rowLength;
  }

  long rows() {
    return shape.length == 0 ? 1 : shape[0];
  }

  /** A copy of the values and the version they belong to. */
  synchronized Snapshot read() {
    return new Snapshot(values.clone(), version);
  }

  synchronized Snapshot gather(long[] rows) {
    float[] out = new float[rows.length * rowLength];
    for (int i = 0; i < rows.length; i++) {
      System.arraycopy(values, rowOffset(rows[i]), out, i * rowLength, rowLength);
    }
    return new Snapshot(out, version);
  }

  synchronized long assign(float[] update) {
    requireSize(update.length, values.length, "assign");
    System.arraycopy(update, 0, values, 0, values.length);
    return ++version;
  }

  synchronized long assignAdd(float[] delta) {
    requireSize(delta.length, values.length, "assign-add");
    for (int i = 0; i < values.length; i++) {
      values[i] += delta[i];
    }
    return ++version;
  }

  synchronized long scatterAdd(long[] rows, float[] delta) {
    requireSize(delta.length, (long) rows.length * rowLength, "scatter-add of " + rows.length + " rows");
    int[] offsets = new int[rows.length];
    for (int i = 0; i < rows.length; i++) {
      offsets[i] = rowOffset(rows[i]);
    }
    for (int i = 0; i < rows.length; i++) {
      for (int j = 0; j < rowLength; j++) {
        values[offsets[i] + j] += delta[i * rowLength + j];
      }
    }
    return ++version;
  }

  /** One optimizer step with this gradient, Keras 3's update rule in float32. */
  synchronized long applyGradient(float[] g) {
    requireSize(g.length, values.length, "apply-gradient");
    float lr = optimizer.learningRate();
    switch (optimizer.kind()) {
      case NONE -> throw new IllegalStateException("variable " + name + " was created without an optimizer; "
          + "create it with one (Optimizer.sgd, momentum, adagrad, adam) to apply gradients on the ps");
      case SGD -> {
        for (int i = 0; i < values.length; i++) {
          values[i] -= g[i] * lr;
        }
      }
      case MOMENTUM -> {
        float momentum = optimizer.momentum();
        for (int i = 0; i < values.length; i++) {
          slot1[i] = slot1[i] * momentum - g[i] * lr;
          values[i] += optimizer.nesterov() ? slot1[i] * momentum - g[i] * lr : slot1[i];
        }
      }
      case ADAGRAD -> {
        for (int i = 0; i < values.length; i++) {
          slot1[i] += g[i] * g[i];
          values[i] -= lr * g[i] / (float) Math.sqrt(slot1[i] + optimizer.epsilon());
        }
      }
      case ADAM -> {
        float step = (float) (iterations + 1);
        float beta1Power = (float) Math.pow(optimizer.beta1(), step);
        float beta2Power = (float) Math.pow(optimizer.beta2(), step);
        float alpha = lr * (float) Math.sqrt(1 - beta2Power) / (1 - beta1Power);
        float oneMinusBeta1 = 1 - optimizer.beta1();
        float oneMinusBeta2 = 1 - optimizer.beta2();
        for (int i = 0; i < values.length; i++) {
          slot1[i] += (g[i] - slot1[i]) * oneMinusBeta1;
          slot2[i] += (g[i] * g[i] - slot2[i]) * oneMinusBeta2;
          values[i] -= slot1[i] * alpha / ((float) Math.sqrt(slot2[i]) + optimizer.epsilon());
        }
      }
    }
    iterations++;
    return ++version;
  }

  private int rowOffset(long row) {
    if (shape.length == 0) {
      throw new IllegalArgumentException("variable " + name + " is a scalar: it has no rows to gather or scatter");
    }
    if (row < 0 || row >= shape[0]) {
      throw new IllegalArgumentException("row " + row + " is out of range for variable " + name + " of "
          + shape[0] + " rows");
    }
    return (int) row * rowLength;
  }

  private void requireSize(long got, long expected, String what) {
    if (got != expected) {
      throw new IllegalArgumentException(what + " on variable " + name + " of shape " + Arrays.toString(shape)
          + " needs " + expected + " values, got " + got);
    }
  }

  record Snapshot(float[] values, long version) {}
}
