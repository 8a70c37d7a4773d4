package io.muster.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.TaskId;
import io.muster.cluster.TfConfig;
import io.muster.rpc.JobToken;
import io.muster.testing.ChildJvm;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The example as a user runs it: worker JVMs with their own TF_CONFIG, 1 worker against 3. */
class SoftmaxRegressionTest {

  @TempDir
  Path tmp;

  private static LocalTraining.Result train(int workers) throws Exception {
    return train(workers, List.of("--epochs", "3", "--global-batch", "240"), new ByteArrayOutputStream());
  }

  private static LocalTraining.Result train(int workers, List<String> args, ByteArrayOutputStream log)
      throws Exception {
    LocalTraining.Result result = LocalTraining.run(workers, args, new PrintStream(log, true, StandardCharsets.UTF_8));
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

  /**
   * With {@code --out}, a run whose worker 1 was killed (SIGKILL) in epoch 3 or later leaves the
   * chief's checkpoints readable and a backup; the run started again resumes from the backup, not
   * from the start, ends with the weights of a run never interrupted, and leaves no backup and no
   * worker's temporary directory behind.
   */
  @Test
  void aRunStartedAgainAfterAKilledWorkerResumesFromTheBackupWithTheWeightsOfAnUninterruptedRun() throws Exception {
    Path out = tmp.resolve("out");
    List<String> args = List.of("--epochs", "6", "--global-batch", "240", "--out", out.toString());
    List<Process> workers = LocalTraining.start(LocalTraining.cluster(2), List.of("--epochs", "100000",
        "--global-batch", "240", "--out", out.toString()));
    try {
      awaitLine(workers.get(0), Pattern.compile("epoch 2: loss"));
      workers.get(1).destroyForcibly(); // SIGKILL
      for (Process worker : workers) {
        assertTrue(worker.waitFor(60, TimeUnit.SECONDS), "a worker still runs a minute after worker 1 was killed");
      }
      assertEquals(1, workers.get(0).exitValue(), "the chief lost its peer");
    } finally {
      workers.forEach(Process::destroyForcibly);
    }
    assertTrue(Files.exists(out.resolve("ckpt").resolve("checkpoint")), "the chief's checkpoints");
    assertTrue(Files.exists(out.resolve("backup").resolve("chief")), "the chief's backup");

    ByteArrayOutputStream resumedLog = new ByteArrayOutputStream();
    LocalTraining.Result resumed = train(2, args, resumedLog);
    Matcher done = Pattern.compile("\\[worker 0\\] .*resumed from the backup: (\\d+) epochs done")
        .matcher(resumedLog.toString(StandardCharsets.UTF_8));
    assertTrue(done.find() && Integer.parseInt(done.group(1)) >= 2, resumedLog.toString(StandardCharsets.UTF_8));
    LocalTraining.Result uninterrupted = train(2, List.of("--epochs", "6", "--global-batch", "240"),
        new ByteArrayOutputStream());
    assertEquals(uninterrupted.workers().get(0).get("weights_sha256"), resumed.workers().get(0).get("weights_sha256"));
    assertTrue(Files.exists(out.resolve("ckpt").resolve("ckpt-6.index")), "the last epoch's checkpoint");
    assertTrue(Files.notExists(out.resolve("backup").resolve("chief")), "the backup is deleted once training ended");
    try (var left = Files.list(out.resolve("ckpt"))) {
      assertTrue(left.noneMatch(p -> p.getFileName().toString().startsWith("workertemp_")), "no worker's temp dir");
    }
  }

  /**
   * A plain {@code TF_CONFIG} run (no launcher) whose worker 1 gets SIGTERM 300 ms into training
   * ({@code --preempt-after}), as any scheduler sends before it kills: both workers back up after one
   * agreed step and exit 42 saying where; the run started again resumes after that very step (not
   * at the epoch's start) and ends with the weights of a run never interrupted.
   */
  @Test
  void aSigtermToOneWorkerSavesTheGangAtOneStepAndTheNextRunResumesRightAfterIt() throws Exception {
    Path out = tmp.resolve("out");
    List<String> args = List.of("--epochs", "30", "--global-batch", "240", "--out", out.toString());
    ByteArrayOutputStream log = new ByteArrayOutputStream();
    LocalTraining.Result preempted = LocalTraining.run(2, args, Optional.of(Duration.ofMillis(300)),
        new PrintStream(log, true, StandardCharsets.UTF_8));
    String printed = log.toString(StandardCharsets.UTF_8);
    assertEquals(42, preempted.exitCode(), printed);
    Matcher saved = Pattern.compile("\\[worker 0\\] preempted: saved after step (\\d+) of epoch (\\d+) for preemption; "
        + "run again to resume there").matcher(printed);
    assertTrue(saved.find(), printed);
    int step = Integer.parseInt(saved.group(1));
    int epoch = Integer.parseInt(saved.group(2));
    assertTrue(epoch >= 2 && epoch < 30, "saved in epoch " + epoch + ", after the notice and before the end");
    assertTrue(printed.contains("[worker 1] preempted: saved after step " + step + " of epoch " + epoch + " "), printed);
    assertTrue(Pattern.compile("worker 1 got SIGTERM; every worker saved after step " + step + " of epoch " + epoch
        + " for preemption, \\d+ ms after it; run the same command again without --preempt-after to resume there")
        .matcher(printed).find(), printed);
    assertTrue(printed.contains("worker 1: preemption notice (SIGTERM)"), printed);
    assertTrue(printed.contains("for preemption (worker 1 received SIGTERM)"), printed);

    ByteArrayOutputStream resumedLog = new ByteArrayOutputStream();
    LocalTraining.Result resumed = train(2, args, resumedLog);
    int stepsPerEpoch = SoftmaxRegression.TRAIN_ROWS / 240;
    String resumedAt = step == stepsPerEpoch ? epoch + " epochs done, and 0 steps" : (epoch - 1) + " epochs done, and "
        + step + " steps";
    assertTrue(resumedLog.toString(StandardCharsets.UTF_8).contains("resumed from the backup: " + resumedAt),
        "expected to resume with " + resumedAt + ": " + resumedLog.toString(StandardCharsets.UTF_8));
    LocalTraining.Result uninterrupted = train(2, List.of("--epochs", "30", "--global-batch", "240"),
        new ByteArrayOutputStream());
    assertEquals(uninterrupted.workers().get(0).get("weights_sha256"), resumed.workers().get(0).get("weights_sha256"));
    assertTrue(Files.notExists(out.resolve("backup").resolve("chief")), "the backup is deleted once training ended");
  }

  /** A SIGTERM while the task still waits for its gang ends it at once, with the preemption code and no save. */
  @Test
  void aSigtermBeforeTheGangFormedEndsTheTaskAtOnceWithoutASave() throws Exception {
    Path out = tmp.resolve("out");
    Map<String, String> env = Map.of(TfConfig.ENV, TfConfig.of(LocalTraining.cluster(2), new TaskId("worker", 1))
        .toJson(), JobToken.ENV, JobToken.random().value());
    try (ChildJvm worker = ChildJvm.start("worker-1", SoftmaxRegression.class,
        List.of("--epochs", "20", "--out", out.toString()), env, tmp.resolve("logs"))) {
      // past the signal handler's installation; worker 0 never starts
      worker.awaitOutput("task worker 1 serving on", Duration.ofMinutes(3));
      worker.process().toHandle().destroy(); // SIGTERM
      assertEquals(42, worker.waitFor(Duration.ofSeconds(30)), worker.output());
      assertTrue(worker.output().contains("preempted: SIGTERM came before the gang formed; no step was taken, so there "
          + "is nothing new to save: the next run starts where the last backup left off"), worker.output());
    }
    assertTrue(Files.notExists(out.resolve("backup").resolve("chief")), "no backup");
  }

  /** Reads {@code process}'s output until a line matches; fails at its end, or after three minutes. */
  private static void awaitLine(Process process, Pattern line) throws Exception {
    List<String> seen = new CopyOnWriteArrayList<>();
    // not closed: the worker goes on writing to it until it ends
    BufferedReader in = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
    CompletableFuture<Boolean> found = CompletableFuture.supplyAsync(() -> {
      try {
        for (String l = in.readLine(); l != null; l = in.readLine()) {
          if (line.matcher(l).find()) {
            return true;
          }
          seen.add(l);
        }
        return false;
      } catch (IOException e) {
        return false;
      }
    });
    try {
      assertTrue(found.get(3, TimeUnit.MINUTES), "the output ended before a line matching " + line + ": " + seen);
    } catch (TimeoutException e) {
      throw new AssertionError("no line matching " + line + " within 3 minutes: " + seen, e);
    }
  }
}
