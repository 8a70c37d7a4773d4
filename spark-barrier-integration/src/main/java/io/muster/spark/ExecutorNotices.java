package io.muster.spark;

import io.muster.cluster.TaskId;
import io.muster.internal.Durations;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.util.ShutdownHookManager;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.util.SignalUtils;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Tells this executor's running Muster tasks what Spark tells none of them: that the executor is
 * being decommissioned, or is shutting down. Spark lets a decommissioned executor's running tasks
 * finish without a word to them, and stops a terminated executor without interrupting them; a
 * task that hears either as a preemption notice saves at a step its gang agrees on and leaves.
 *
 * <p>Decommissioning: Spark's decommission signal ({@code spark.executor.decommission.signal},
 * SIGPWR by default: what Kubernetes' pre-stop script and an administrator send). The action joins
 * Spark's own chain of handlers for the signal ({@link SignalUtils}), so Spark's decommissioning,
 * where enabled, still runs. It reports the signal handled only when a task heard it: the executor
 * then stays up while its tasks save, where without {@code spark.decommission.enabled} the signal's
 * default would end it at once. With no Muster task running, the signal does what it did before.
 *
 * <p>Shutting down (SIGTERM or SIGINT, whoever sent it; the driver going away): a shutdown hook that
 * runs before Spark's own and before Hadoop closes its file systems gives every task the notice,
 * then waits up to {@value #SHUTDOWN_SAVE_TIMEOUT} (default 20s) for them to end.
 */
final class ExecutorNotices {
  /** Spark setting: how long an executor that is shutting down waits for its Muster tasks to save and leave. */
  static final String SHUTDOWN_SAVE_TIMEOUT = "spark.muster.shutdownSaveTimeout";
  private static final Logger log = LoggerFactory.getLogger(ExecutorNotices.class);
  /** Spark's hook runs at {@code FileSystem.SHUTDOWN_HOOK_PRIORITY + 30}; higher runs first. */
  private static final int BEFORE_SPARK = FileSystem.SHUTDOWN_HOOK_PRIORITY + 40;
  /** Guarded by itself: a closing listener notifies the shutdown hook waiting for the tasks to end. */
  private static final Set<Listener> listening = ConcurrentHashMap.newKeySet();
  private static boolean installed; // guarded by ExecutorNotices.class

  private ExecutorNotices() {}

  /** Starts passing notices on to {@code task}; they wait in the listener until {@link Listener#deliverTo}. */
  static Listener listen(TaskId task) {
    install();
    Listener listener = new Listener(task);
    listening.add(listener);
    return listener;
  }

  private static synchronized void install() {
    if (installed) {
      return;
    }
    installed = true;
    SparkConf conf = SparkEnv.get() == null ? new SparkConf(false) : SparkEnv.get().conf();
    String signal = conf.get("spark.executor.decommission.signal", "PWR");
    Duration saveTimeout = Duration.ofMillis(conf.getTimeAsMs(SHUTDOWN_SAVE_TIMEOUT, "20s"));
    SignalUtils.register(signal, () -> tell("SIG" + signal + ": Spark is decommissioning this executor"));
    ShutdownHookManager.get().addShutdownHook(() -> {
      if (tell("the executor is shutting down")) {
        awaitEnd(saveTimeout);
      }
    }, BEFORE_SPARK, saveTimeout.toMillis() + 5_000, TimeUnit.MILLISECONDS);
  }

  /** Gives every listening task the notice; whether there was one. */
  private static boolean tell(String reason) {
    listening.forEach(listener -> listener.hear(reason));
    return !listening.isEmpty();
  }

  private static void awaitEnd(Duration timeout) {
    long deadline = System.nanoTime() + timeout.toNanos();
    synchronized (listening) {
      try {
        for (long left = timeout.toNanos(); !listening.isEmpty() && left > 0; left = deadline - System.nanoTime()) {
          listening.wait(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      if (!listening.isEmpty()) {
        log.warn("the executor shuts down with {} still running {} after the notice ({}): they did not save in time",
            listening, Durations.words(timeout), SHUTDOWN_SAVE_TIMEOUT);
      }
    }
  }

  /** One task's notices; close it when the task ends. */
  static final class Listener implements AutoCloseable {
    private final TaskId task;
    private Consumer<String> target; // guarded by this
    private String pending; // guarded by this

    private Listener(TaskId task) {
      this.task = task;
    }

    /** Where this task's notices go from now on, the one that came before included. */
    synchronized void deliverTo(Consumer<String> notice) {
      target = notice;
      if (pending != null) {
        notice.accept(pending);
      }
    }

    private synchronized void hear(String reason) {
      log.info("{}: {}; passing the notice on", task, reason);
      if (target != null) {
        target.accept(reason);
      } else if (pending == null) {
        pending = reason;
      }
    }

    @Override
    public void close() {
      synchronized (listening) {
        listening.remove(this);
        listening.notifyAll();
      }
    }

    @Override
    public String toString() {
      return task.toString();
    }
  }
}
