package io.muster.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.charset.StandardCharsets;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The parameter-server examples as a user runs them ({@code ./muster example NAME}): a chief,
 * workers and ps tasks in their own JVMs; each test checks the lines that tell the story.
 */
class PsExamplesTest {

  private record Run(int exit, String out, String err) {}

  private static Run run(String... args) throws Exception {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int exit = Examples.run(args, new PrintStream(out, true, StandardCharsets.UTF_8),
        new PrintStream(err, true, StandardCharsets.UTF_8));
    return new Run(exit, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
  }

  private static void assertHas(Run run, String text) {
    assertTrue(run.out().contains(text), "no '" + text + "' in:\n" + run.out());
  }

  @Test
  void twoTasksShareOneVariable() throws Exception {
    Run run = run("share");
    assertEquals(0, run.exit(), run.out());
    assertHas(run, "[worker 0] ");
    assertHas(run, "[chief 0] worker 0 added 5 and read 15.0");
    assertHas(run, "[chief 0] the chief reads 'shared' = 15.0: the worker's update, through ps 0");
  }

  @Test
  void variablesArePlacedOnTheChosenPsOrRoundRobin() throws Exception {
    Run run = run("placement");
    assertEquals(0, run.exit(), run.out());
    assertHas(run, "pinned_to_ps1 lives on ps 1");
    assertHas(run, "pinned_to_ps0 lives on ps 0");
    assertHas(run, "a lives on ps 0");
    assertHas(run, "b lives on ps 1");
    assertHas(run, "worker 0 reads pinned_to_ps1 = [1.0, 1.0]");
  }

  @Test
  void theParameterServerPrintsTheSharedCounterAsTwoWorkersIncrementIt() throws Exception {
    Run run = run("increment");
    assertEquals(0, run.exit(), run.out());
    assertHas(run, "[ps 0] counter = 200");
    assertHas(run, "[chief 0] 200 increments scheduled; counter = 200");
    long psLines = run.out().lines().filter(l -> l.startsWith("[ps 0] counter = ")).count();
    assertTrue(psLines >= 2, "the ps printed the counter as it grew, not only at the end:\n" + run.out());
  }

  @Test
  void workersWaitUntilTheChiefHasInitializedTheVariables() throws Exception {
    Run run = run("wait-for-chief");
    assertEquals(0, run.exit(), run.out());
    int waiting = run.out().indexOf("[worker 0] waiting for the chief to initialize 'weights'");
    int initialized = run.out().indexOf("[chief 0] 'weights' initialized");
    int ready = run.out().indexOf("[worker 0] 'weights' is ready: [0.1, 0.2, 0.3]");
    assertTrue(waiting >= 0 && initialized > waiting && ready > initialized, run.out());
  }

  @Test
  void aLateTaskIsWaitedForAndAMissingOneIsNamedAtTheDeadline() throws Exception {
    Run late = run("late-task");
    assertEquals(0, late.exit(), late.out());
    assertHas(late, "» worker 1 starts now, 10 s late");
    assertHas(late, "[chief 0] every task joined; 20 increments done: counter = 20");
    Run missing = run("late-task", "--missing");
    assertEquals(1, missing.exit(), missing.out());
    // The first task whose join deadline passes names the missing worker; the others then fail with it.
    assertTrue(Pattern.compile("\\] failed: \\w+ \\d timed out after 20 s waiting for all tasks to join the "
        + "coordination service; 1 of 4 tasks missing: worker 1 at 127\\.0\\.0\\.1:\\d+: connection refused")
        .matcher(missing.out()).find(), missing.out());
    assertHas(missing, "[chief 0] failed: ");
  }

  @Test
  void aWorkerThatLeavesCostsNothingAndComesBack() throws Exception {
    Run run = run("leave-and-return");
    assertEquals(0, run.exit(), run.out());
    assertHas(run, "» worker 1 killed (SIGKILL)");
    Matcher done = Pattern.compile("all 100 closures completed without worker 1 \\(closures per worker: \\{[^}]*}\\); "
        + "counter = (\\d+)").matcher(run.out());
    assertTrue(done.find(), run.out());
    int counter = Integer.parseInt(done.group(1));
    assertTrue(counter == 100 || counter == 101, "at least once, at most once more: " + counter);
    assertHas(run, "» worker 1 started again with the same TF_CONFIG");
    assertHas(run, "[chief 0] worker 1 is back and runs closures again");
  }

  @Test
  void trainingReachesTheSameAccuracyWhenAWorkerIsKilledMidway() throws Exception {
    Run steady = run("train", "--steps", "200");
    Run killed = run("train", "--steps", "200", "--kill-worker-at", "60");
    assertEquals(0, steady.exit(), steady.out());
    assertEquals(0, killed.exit(), killed.out());
    assertHas(killed, "» worker 1 killed (SIGKILL)");
    double a = accuracy(steady);
    double b = accuracy(killed);
    assertTrue(a > 0.85, "asynchronous SGD learned: " + a + " (chance is 0.2)");
    assertTrue(Math.abs(a - b) < 0.03, "with a worker killed midway: " + b + " against " + a);
  }

  @Test
  void trainingOnDigitsCsvLearnsThemWithAWorkerKilledMidway() throws Exception {
    java.nio.file.Path digits = java.nio.file.Path.of("..", "..", "shared", "data", "digits.csv").toAbsolutePath()
        .normalize();
    org.junit.jupiter.api.Assumptions.assumeTrue(java.nio.file.Files.exists(digits),
        "../shared/data/digits.csv is not here (a user's clone has no ../shared): nothing to train on");
    Run run = run("train", "--data", digits.toString(), "--steps", "300", "--kill-worker-at", "100");
    assertEquals(0, run.exit(), run.out());
    assertHas(run, digits + ": 1797 rows, 64 features, 10 classes; 1437 for training, the rest held out");
    assertHas(run, "» worker 1 killed (SIGKILL)");
    assertTrue(accuracy(run) > 0.9, "softmax regression on the digits: " + accuracy(run));
  }

  @Test
  void badExampleArgumentsAreOneLineAndExit2BeforeAnythingStarts() throws Exception {
    Run steps = run("train", "--steps", "0");
    assertEquals(2, steps.exit());
    assertEquals("muster example train: --steps must be a positive integer, was '0'\n", steps.err());
    assertEquals("", steps.out());
    Run kill = run("train", "--steps", "10", "--kill-worker-at", "10");
    assertEquals(2, kill.exit());
    assertEquals("muster example train: --kill-worker-at must be below --steps (10), was 10\n", kill.err());
    Run data = run("train", "--data", "/no/such/file.csv");
    assertEquals(2, data.exit());
    assertTrue(data.err().startsWith("muster example train: cannot read --data /no/such/file.csv: "), data.err());
    Path tiny = Files.writeString(Files.createTempFile("tiny", ".csv"), "a,b,label\n1,2,0\n3,4,1\n");
    try {
      Run small = run("train", "--data", tiny.toString());
      assertEquals(2, small.exit());
      assertEquals("muster example train: --data " + tiny + " has 2 rows: 1 to train on and 1 held out; 2 workers need"
          + " a row each to train on, and one row is held out: give at least 3 rows\n", small.err());
      assertEquals("", small.out());
    } finally {
      Files.delete(tiny);
    }
    Run unknown = run("share", "--workers", "3");
    assertEquals(2, unknown.exit());
    assertTrue(unknown.err().startsWith("muster example share: unknown argument '--workers'"), unknown.err());
  }

  @Test
  void aDivergingTrainingStopsAtTheStepWhoseLossIsNotFiniteAndFails() throws Exception {
    Run run = run("train", "--learning-rate", "1e38", "--steps", "300");
    assertEquals(1, run.exit(), run.out());
    Matcher m = Pattern.compile("failed: function train_step failed on worker \\d: java.lang.IllegalStateException: the"
        + " loss is (NaN|Infinity) at step (\\d+): training diverged; give a smaller --learning-rate, or check the data"
        + " for extreme values").matcher(run.out());
    assertTrue(m.find(), run.out());
    assertTrue(Integer.parseInt(m.group(2)) < 300, "it stopped at step " + m.group(2));
    assertTrue(!run.out().contains("held-out accuracy"), "no result is reported: " + run.out());
  }

  private static double accuracy(Run run) {
    Matcher m = Pattern.compile("held-out accuracy (\\d\\.\\d+)").matcher(run.out());
    assertTrue(m.find(), run.out());
    return Double.parseDouble(m.group(1));
  }
}
