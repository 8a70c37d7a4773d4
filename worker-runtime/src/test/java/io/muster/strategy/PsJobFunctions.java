package io.muster.strategy;

import io.muster.coordinator.Functions;
import io.muster.coordinator.Value;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/** The functions of the parameter-server tests, registered alike on every task (in this JVM and in child JVMs). */
final class PsJobFunctions {

  /** Each closure of "block" takes a permit (tasks in the test's own JVM only). */
  static volatile Semaphore gate = new Semaphore(Integer.MAX_VALUE);
  /** How many closures of "block" are waiting at the gate now. */
  static final java.util.concurrent.atomic.AtomicInteger waiting = new java.util.concurrent.atomic.AtomicInteger();

  private PsJobFunctions() {}

  static Functions functions() {
    return Functions.builder()
        // [i, pause ms] → [i², worker index]: an idempotent result.
        .function("square", (worker, args) -> {
          long i = args.get(0).longValue();
          pause(args.size() > 1 ? args.get(1).longValue() : 0);
          return Value.of(new long[] {i * i, worker.task().index()}, new long[] {2});
        })
        // Adds 1 to the variable "count" on its ps: not idempotent, so it shows how often closures ran.
        .function("count", (worker, args) -> {
          pause(args.isEmpty() ? 0 : args.get(0).longValue());
          worker.variable("count").assignAdd(new float[] {1f});
          return Value.of((long) worker.task().index());
        })
        .function("read", (worker, args) -> Value.of(worker.variable(args.get(0).string()).read()[0]))
        .function("fail_on_3", (worker, args) -> {
          if (args.get(0).longValue() == 3) {
            throw new IllegalArgumentException("closure 3 is broken");
          }
          return Value.NONE;
        })
        .function("block", (worker, args) -> {
          waiting.incrementAndGet();
          try {
            if (!gate.tryAcquire(60, TimeUnit.SECONDS)) {
              throw new IllegalStateException("the test never opened the gate");
            }
          } finally {
            waiting.decrementAndGet();
          }
          return Value.of((long) worker.task().index());
        })
        // A per-worker resource: a counter that lives on the worker.
        .resource("counter", (worker, args) -> new AtomicLong(args.isEmpty() ? 0 : args.get(0).longValue()))
        // [resource] → [worker index, the worker's counter after incrementing it]
        .function("tick", (worker, args) -> Value.of(new long[] {worker.task().index(),
            worker.resource(args.get(0), AtomicLong.class).incrementAndGet()}, new long[] {2}))
        .build();
  }

  private static void pause(long millis) throws InterruptedException {
    if (millis > 0) {
      Thread.sleep(millis);
    }
  }
}
