package io.muster.examples;

import io.muster.strategy.MultiWorkerMirroredStrategy;
import io.muster.checkpoint.Tensor;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;

/** Multinomial logistic regression: weights {@code [features x classes]} and a bias per class. */
final class SoftmaxModel {
  final int features;
  final int classes;
  final float[] weights;
  final float[] bias;

  SoftmaxModel(int features, int classes) {
    this.features = features;
    this.classes = classes;
    this.weights = new float[features * classes];
    this.bias = new float[classes];
  }

  List<float[]> variables() {
    return List.of(weights, bias);
  }

  /** A copy of the variables as checkpoint tensors: {@code weights [features, classes]} and {@code bias [classes]}. */
  Map<String, Tensor> tensors() {
    return Map.of("weights", Tensor.ofFloats(new long[] {features, classes}, weights.clone()),
        "bias", Tensor.ofFloats(new long[] {classes}, bias.clone()));
  }

  /** The variables of a model of this size, as a checkpoint or backup of it must hold them. */
  static Map<String, Tensor> variablesLike(int features, int classes) {
    return new SoftmaxModel(features, classes).tensors();
  }

  /** Class probabilities of one row into {@code out}. */
  void predict(float[] row, float[] out) {
    float max = Float.NEGATIVE_INFINITY;
    for (int c = 0; c < classes; c++) {
      float z = bias[c];
      for (int f = 0; f < features; f++) {
        z += row[f] * weights[f * classes + c];
      }
      out[c] = z;
      max = Math.max(max, z);
    }
    float sum = 0;
    for (int c = 0; c < classes; c++) {
      out[c] = (float) Math.exp(out[c] - max);
      sum += out[c];
    }
    for (int c = 0; c < classes; c++) {
      out[c] /= sum;
    }
  }

  /**
   * Mean cross-entropy gradient of rows {@code [from, to)} into {@code gradW}/{@code gradB}
   * (overwritten); returns the mean loss.
   */
  float gradient(SyntheticBlobs data, int[] order, int from, int to, float[] gradW, float[] gradB) {
    java.util.Arrays.fill(gradW, 0);
    java.util.Arrays.fill(gradB, 0);
    float[] p = new float[classes];
    double loss = 0;
    int n = to - from;
    for (int k = from; k < to; k++) {
      int i = order[k];
      float[] row = data.x()[i];
      predict(row, p);
      loss -= Math.log(Math.max(p[data.y()[i]], 1e-12f));
      p[data.y()[i]] -= 1;
      for (int c = 0; c < classes; c++) {
        float d = p[c] / n;
        gradB[c] += d;
        for (int f = 0; f < features; f++) {
          gradW[f * classes + c] += row[f] * d;
        }
      }
    }
    return (float) (loss / n);
  }

  /**
   * One synchronous epoch of SGD over this replica's shard, shuffled with {@code random}: each
   * step's gradient (and loss) is averaged over the replicas before the update, so every replica
   * makes the same update. Returns the mean loss of the steps it ran and where their time went.
   *
   * @param epoch the epoch's number from 1, to name it when the loss becomes NaN or infinite
   * @param firstStep the step to start at (from 0): an epoch resumed where a preempted run saved; the
   *     order is the same shuffle, so the epoch goes on exactly as it would have
   * @param afterStep called after each step's update with the step (from 0), to back up
   * @throws IllegalStateException at the step whose loss is NaN or infinite, on every replica
   */
  Epoch trainEpoch(MultiWorkerMirroredStrategy strategy, SyntheticBlobs shard, Random random, int epoch, int firstStep,
      int steps, int localBatch, float learningRate, StepEnd afterStep) throws Exception {
    long start = System.nanoTime();
    long allReduce = 0;
    int[] order = new int[shard.rows()];
    for (int i = 0; i < order.length; i++) {
      order[i] = i;
    }
    for (int i = order.length - 1; i > 0; i--) {
      int j = random.nextInt(i + 1);
      int t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
    float[] gradW = new float[weights.length];
    float[] gradB = new float[bias.length];
    float[] loss = new float[1];
    double total = 0;
    for (int step = firstStep; step < steps; step++) {
      loss[0] = gradient(shard, order, step * localBatch, (step + 1) * localBatch, gradW, gradB);
      long reduceStart = System.nanoTime();
      strategy.allReduce(List.of(gradW, gradB, loss));
      allReduce += System.nanoTime() - reduceStart;
      if (!Float.isFinite(loss[0])) { // the same on every replica: each stops at this step
        throw new IllegalStateException(diverged(loss[0], "epoch " + epoch + " step " + (step + 1)));
      }
      for (int i = 0; i < gradW.length; i++) {
        weights[i] -= learningRate * gradW[i];
      }
      for (int i = 0; i < gradB.length; i++) {
        bias[i] -= learningRate * gradB[i];
      }
      total += loss[0];
      afterStep.accept(step);
    }
    int ran = steps - firstStep;
    return new Epoch(total / ran, (long) ran * localBatch * strategy.numReplicasInSync(), System.nanoTime() - start,
        allReduce);
  }

  /** What a training loop does after each step, given the step's number from 0. */
  @FunctionalInterface
  interface StepEnd {
    StepEnd NONE = step -> {};

    void accept(int step) throws Exception;
  }

  /** An epoch's mean loss, the examples it trained on over all replicas, its time and the part spent in all-reduce. */
  record Epoch(double loss, long examples, long nanos, long allReduceNanos) {
    /**
     * {@code 8507 examples/s on 4 workers; 12% of step time in all-reduce}: this epoch's own rate, so a
     * slow link or a slow peer shows in the epoch it happens, and the share of the steps that waited on the network
     * (checkpoints and evaluation are not in it).
     */
    String throughput(int workers) {
      return String.format(Locale.ROOT, "%d examples/s on %d workers; %d%% of step time in all-reduce",
          Math.round(examples * 1e9 / nanos), workers, Math.round(100.0 * allReduceNanos / nanos));
    }
  }

  /** The failure of a run whose loss became NaN or infinite at {@code where}. */
  static String diverged(float loss, String where) {
    return "the loss is " + loss + " at " + where + ": training diverged; give a smaller --learning-rate, or check "
        + "the data for extreme values";
  }

  double accuracy(SyntheticBlobs data) {
    float[] p = new float[classes];
    int correct = 0;
    for (int i = 0; i < data.rows(); i++) {
      predict(data.x()[i], p);
      int best = 0;
      for (int c = 1; c < classes; c++) {
        if (p[c] > p[best]) {
          best = c;
        }
      }
      if (best == data.y()[i]) {
        correct++;
      }
    }
    return (double) correct / data.rows();
  }
}
