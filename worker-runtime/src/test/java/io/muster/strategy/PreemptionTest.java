package io.muster.strategy;

import static io.muster.strategy.MultiWorkerMirroredStrategyTest.CHIEF_AND_TWO_WORKERS;
import static io.muster.strategy.MultiWorkerMirroredStrategyTest.onEveryTask;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.collective.CommunicationOptions;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

/**
 * Every replica saves at one step, wherever and whenever the notice arrives: three real strategies
 * on 127.0.0.1, each taking all-reduce steps and asking {@link Preemption#saveAfter} after each.
 */
class PreemptionTest {

  private static final int MAX_STEPS = 1_000_000;

  /**
   * Steps until the gang agrees to save; returns the step it saved after, or -1 when it never did.
   * Each step all-reduces the step number, so a replica out of step with the others shows as a wrong mean.
   */
  private static int stepUntilSaved(MultiWorkerMirroredStrategy strategy, Function<Integer, Boolean> noticeAfter) {
    float[] step = new float[1];
    for (int done = 1; done <= MAX_STEPS; done++) {
      step[0] = done;
      strategy.allReduce(List.of(step));
      assertEquals(done, step[0], "every replica took step " + done + " together");
      if (noticeAfter.apply(done)) {
        strategy.preemption().notice("a test's notice");
      }
      if (strategy.preemption().saveAfter(done)) {
        return done;
      }
    }
    return -1;
  }

  @Test
  void aNoticeToOneReplicaMakesEveryReplicaSaveAfterTheStepThatReplicaTakesNext() throws Exception {
    List<Integer> saved = onEveryTask(CHIEF_AND_TWO_WORKERS, CommunicationOptions.DEFAULTS,
        s -> stepUntilSaved(s, done -> s.taskId().toString().equals("worker 1") && done == 50));
    assertEquals(List.of(51, 51, 51), saved);
  }

  @Test
  void noticesToEveryReplicaAtOnceAgreeOnTheFirstPublishedStep() throws Exception {
    List<Integer> saved = onEveryTask(CHIEF_AND_TWO_WORKERS, CommunicationOptions.DEFAULTS,
        s -> stepUntilSaved(s, done -> done == 50));
    assertEquals(List.of(51, 51, 51), saved);
    List<Integer> staggered = onEveryTask(CHIEF_AND_TWO_WORKERS, CommunicationOptions.DEFAULTS,
        s -> stepUntilSaved(s, done -> done == 40 + 5 * s.inputPipelineId()));
    assertEquals(List.of(41, 41, 41), staggered, "the chief's notice at step 40 came first");
  }

  /** A notice from another thread, as a signal handler's, lands anywhere in a step; the replicas still agree. */
  @Test
  void aNoticeFromAnotherThreadAtAnyMomentStillGivesOneStep() throws Exception {
    ScheduledExecutorService signaller = Executors.newSingleThreadScheduledExecutor();
    try {
      List<String> seen = onEveryTask(CHIEF_AND_TWO_WORKERS, CommunicationOptions.DEFAULTS, s -> {
        boolean before = s.preemption().requested();
        if (s.taskId().toString().equals("worker 0")) {
          signaller.schedule(() -> s.preemption().notice("SIGTERM"), 300, TimeUnit.MILLISECONDS);
        }
        int step = stepUntilSaved(s, done -> false);
        return before + " " + step + " " + s.preemption().requested() + " " + s.preemption().reason().orElse("-");
      });
      int step = Integer.parseInt(seen.get(0).split(" ")[1]);
      assertTrue(step > 1, "the notice came 300 ms in, after the first step: " + seen);
      assertEquals(List.of("false " + step + " true -", "false " + step + " true SIGTERM", "false " + step + " true -"),
          seen);
    } finally {
      signaller.shutdownNow();
    }
  }

  @Test
  void withoutANoticeNoStepIsASaveStep() throws Exception {
    List<Boolean> any = onEveryTask(CHIEF_AND_TWO_WORKERS, CommunicationOptions.DEFAULTS, s -> {
      boolean saved = false;
      for (int done = 1; done <= 200; done++) {
        s.allReduce(List.of(new float[] {done}));
        saved |= s.preemption().saveAfter(done);
      }
      return saved || s.preemption().requested();
    });
    assertEquals(List.of(false, false, false), any);
  }
}
