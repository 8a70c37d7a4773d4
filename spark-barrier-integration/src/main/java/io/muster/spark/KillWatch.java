package io.muster.spark;

import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.spark.BarrierTaskContext;

/**
 * Spark kills the other tasks of a failed barrier stage without interrupting their threads
 * ({@code spark.task.interruptOnCancel} is false by default); a task waiting to join, or waiting
 * for its command, would then hold its slot until its own deadline. This watch notices the kill
 * and runs {@code onKill} (stop the server and interrupt the task, or end the command).
 */
final class KillWatch implements AutoCloseable {
  private final ScheduledExecutorService timer;

  KillWatch(BarrierTaskContext ctx, Runnable onKill) {
    timer = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "muster-kill-watch-" + ctx.partitionId());
      t.setDaemon(true);
      return t;
    });
    timer.scheduleWithFixedDelay(() -> {
      if (ctx.isInterrupted()) {
        timer.shutdown();
        onKill.run();
      }
    }, 200, 200, TimeUnit.MILLISECONDS);
  }

  @Override
  public void close() {
    timer.shutdownNow();
  }
}
