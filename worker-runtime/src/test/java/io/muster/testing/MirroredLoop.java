package io.muster.testing;

import io.muster.strategy.MultiWorkerMirroredStrategy;
import java.util.List;

/**
 * A worker in a child JVM: builds {@link MultiWorkerMirroredStrategy} from its TF_CONFIG (the
 * defaults: 10 s heartbeat timeout, 1 min shutdown barrier), prints READY after its first
 * all-reduce, then all-reduces small gradients forever, as a training loop does. A failure ends
 * the process with the exception, through the strategy's close.
 */
public final class MirroredLoop {
  public static void main(String[] args) {
    try (MultiWorkerMirroredStrategy strategy = MultiWorkerMirroredStrategy.builder().join()) {
      float[] gradients = new float[210];
      strategy.allReduce(List.of(gradients));
      System.out.println("READY");
      System.out.flush();
      while (true) {
        strategy.allReduce(List.of(gradients));
      }
    }
  }
}
