package io.muster.ps;

/**
 * The update rule a parameter server applies to a variable on {@link Variable#applyGradient}, with
 * Keras 3's formulas and defaults ({@code keras.optimizers.SGD}, {@code Adagrad}, {@code Adam}),
 * in float32. The slots (momentum, accumulator, Adam's moments and step count) live beside the
 * variable on its ps, one set per variable (per shard).
 */
public record Optimizer(Kind kind, float learningRate, float momentum, boolean nesterov,
    float initialAccumulatorValue, float epsilon, float beta1, float beta2) {

  public enum Kind { NONE, SGD, MOMENTUM, ADAGRAD, ADAM }

  /** No server-side optimizer: {@link Variable#applyGradient} is refused. */
  public static final Optimizer NONE = new Optimizer(Kind.NONE, 0, 0, false, 0, 0, 0, 0);

  public Optimizer {
    if (kind == null) {
      throw new IllegalArgumentException("optimizer kind must be given");
    }
    if (kind != Kind.NONE && !(learningRate > 0 && Float.isFinite(learningRate))) {
      throw new IllegalArgumentException("learningRate must be a finite number > 0, was " + learningRate);
    }
    if (kind == Kind.MOMENTUM && !(momentum >= 0 && momentum < 1)) {
      throw new IllegalArgumentException("momentum must be in [0, 1), was " + momentum);
    }
    if (kind == Kind.ADAM && !(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1)) {
      throw new IllegalArgumentException("Adam's beta1 and beta2 must be in [0, 1), were " + beta1 + " and " + beta2);
    }
    if ((kind == Kind.ADAGRAD || kind == Kind.ADAM) && !(epsilon > 0)) {
      throw new IllegalArgumentException("epsilon must be > 0, was " + epsilon);
    }
  }

  /** {@code w -= lr * g}. */
  public static Optimizer sgd(float learningRate) {
    return new Optimizer(Kind.SGD, learningRate, 0, false, 0, 0, 0, 0);
  }

  /** Keras's SGD with momentum: {@code m = momentum * m - lr * g; w += m} (Nesterov: {@code w += momentum * m - lr * g}). */
  public static Optimizer momentum(float learningRate, float momentum, boolean nesterov) {
    return new Optimizer(Kind.MOMENTUM, learningRate, momentum, nesterov, 0, 0, 0, 0);
  }

  /** Keras's Adagrad, accumulator starting at 0.1, epsilon 1e-7. */
  public static Optimizer adagrad(float learningRate) {
    return new Optimizer(Kind.ADAGRAD, learningRate, 0, false, 0.1f, 1e-7f, 0, 0);
  }

  /** Keras's Adam: beta1 0.9, beta2 0.999, epsilon 1e-7. */
  public static Optimizer adam(float learningRate) {
    return new Optimizer(Kind.ADAM, learningRate, 0, false, 0, 1e-7f, 0.9f, 0.999f);
  }

  io.muster.proto.ps.Optimizer toProto() {
    return io.muster.proto.ps.Optimizer.newBuilder()
        .setKind(io.muster.proto.ps.Optimizer.Kind.valueOf(kind.name()))
        .setLearningRate(learningRate).setMomentum(momentum).setNesterov(nesterov)
        .setInitialAccumulatorValue(initialAccumulatorValue).setEpsilon(epsilon)
        .setBeta1(beta1).setBeta2(beta2).build();
  }

  static Optimizer fromProto(io.muster.proto.ps.Optimizer p) {
    if (p.getKind() == io.muster.proto.ps.Optimizer.Kind.UNRECOGNIZED) {
      throw new IllegalArgumentException("unknown optimizer kind " + p.getKindValue());
    }
    return new Optimizer(Kind.valueOf(p.getKind().name()), p.getLearningRate(), p.getMomentum(), p.getNesterov(),
        p.getInitialAccumulatorValue(), p.getEpsilon(), p.getBeta1(), p.getBeta2());
  }
}
