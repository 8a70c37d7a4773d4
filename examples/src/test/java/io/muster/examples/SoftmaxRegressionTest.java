package io.muster.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The example as a user runs it: worker JVMs with their own TF_CONFIG, 1 worker against 3. */
class SoftmaxRegressionTest {

  private static LocalTraining.Result train(int workers) throws Exception {
    ByteArrayOutputStream log = new ByteArrayOutputStream();
    LocalTraining.Result result = LocalTraining.run(workers, List.of("--epochs", "3", "--global-batch", "240"),
        new PrintStream(log, true, StandardCharsets.UTF_8));
    assertEquals(0, result.exitCode(), log.toString(StandardCharsets.UTF_8));
    return result;
  }

  private static double accuracy(LocalTraining.Result result) {
    return ((Number) result.workers().get(0).get("accuracy")).doubleValue();
  }

  @Test
  void threeWorkersReachTheAccuracyOfOneWithIdenticalWeights() throws Exception {
    LocalTraining.Result one = train(1);
    LocalTraining.Result three = train(3);
    double a1 = accuracy(one);
    double a3 = accuracy(three);
    assertTrue(a1 > 0.6, "one worker learned: " + a1 + " (chance is 0.1)");
    assertTrue(Math.abs(a3 - a1) < 0.015, "3 workers " + a3 + " vs 1 worker " + a1);
    Object hash = three.workers().get(0).get("weights_sha256");
    for (var worker : three.workers()) {
      assertEquals(hash, worker.get("weights_sha256"), "weights of " + worker.get("task"));
      assertEquals(a3, ((Number) worker.get("accuracy")).doubleValue());
    }
  }

  /** A worker's failure (here its own check of the batch, which runs after the gang formed) is one line, no trace. */
  @Test
  void aWorkerThatFailsSaysSoInOneLineAndTheRunFails() throws Exception {
    ByteArrayOutputStream log = new ByteArrayOutputStream();
    LocalTraining.Result result = LocalTraining.run(2, List.of("--epochs", "1", "--global-batch", "241"),
        new PrintStream(log, true, StandardCharsets.UTF_8));
    String printed = log.toString(StandardCharsets.UTF_8);
    assertEquals(1, result.exitCode(), printed);
    for (int worker = 0; worker < 2; worker++) {
      assertTrue(printed.contains("[worker " + worker + "] failed: --global-batch 241 must be a multiple of the number"
          + " of workers (2) so that every worker takes an equal local batch\n"), printed);
    }
    assertTrue(printed.lines().noneMatch(l -> l.contains("\tat ") || l.contains("Exception in thread")),
        "no stack trace: " + printed);
  }
}
