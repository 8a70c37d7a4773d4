package io.muster.spark;

import io.muster.cluster.ClusterSpec;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.collective.CollectiveException;
import io.muster.coordination.CoordinationException;
import io.muster.internal.FileTrees;
import io.muster.internal.rpc.TaskServer;
import io.muster.launch.Attempt;
import io.muster.launch.GangMember;
import io.muster.launch.GangSpec;
import io.muster.launch.OnPreemption;
import io.muster.launch.Rerun;
import io.muster.rpc.DeadlineExceededException;
import io.muster.rpc.PeerUnavailableException;
import io.muster.rpc.Security;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.function.Consumer;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.SparkFiles;
import org.apache.spark.resource.ResourceInformation;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** What the in-JVM and the external-command tasks share: their directory, their gang, their failures. */
final class BarrierTasks {
  private static final Logger log = LoggerFactory.getLogger(BarrierTasks.class);
  /** How long past the cause window (or the saved peers' wait) the driver's word on a failure may take to arrive. */
  private static final Duration DRIVERS_WORD = Duration.ofSeconds(2);

  private BarrierTasks() {}

  /** What an in-JVM task does once its gang is formed, with its bound server, the gang's cluster and its link. */
  interface InGang<R> {
    R run(TaskServer server, ClusterSpec cluster, Security security, TaskLink link) throws Exception;
  }

  /**
   * What the driver tells an in-JVM task, passed on to whatever the task has running by then: a
   * preemption notice to its strategy, the gang's end to its train function's leave deadline.
   */
  static final class Heed implements GangMember.Listener {
    volatile Consumer<String> onPreempt = notice -> { };
    volatile Consumer<String> onAbort = reason -> { };

    @Override
    public void preempt(String notice) {
      onPreempt.accept(notice);
    }

    @Override
    public void abort(String reason) {
      onAbort.accept(reason);
    }
  }

  /**
   * Binds this task's server (port 0, on {@code host} or the executor's address), joins the driver's
   * gang with its address ({@link TaskLink}) so every task forms the same cluster, and runs
   * {@code body}; Spark killing the task closes the server and interrupts this thread. After a
   * failure or a kill the server stops at once: its clients may include a task on a host cut off,
   * whose call in flight would hold a graceful stop for its whole grace, and the slot with it.
   */
  static <R> R inGang(BarrierTaskContext ctx, GangSpec gang, TaskId task, DriverLink driver, String host,
      GangMember.Listener listener, InGang<R> body) throws Exception {
    Path dir = createWorkDir(task);
    try {
      Security security = driver.security(dir.resolve("tls"));
      Thread worker = Thread.currentThread();
      TaskServer server = TaskServer.start(task, new HostPort(host != null ? host : executorHost(ctx), 0), security);
      boolean done = false;
      try (TaskLink link = TaskLink.join(ctx, driver, security, task, server.address(), listener);
          KillWatch watch = new KillWatch(ctx, () -> {
            server.closeNow();
            worker.interrupt();
          })) {
        R result = body.run(server, gang.formed(link.awaitGang()).cluster(), security, link);
        done = true;
        return result;
      } finally {
        if (done) {
          server.close();
        } else {
          server.closeNow();
        }
      }
    } finally {
      deleteRecursively(dir);
    }
  }

  /**
   * How an in-JVM task's failure ends it: the exit the driver is told. A {@link RetryableException}
   * (or the task's rows lost with the executor that held them) asks for a re-run; a peer that died or
   * failed (the runtime's collective, coordination and RPC errors, a lost parameter server) and
   * Spark killing the task are the gang's failure reaching this task; anything else is the train
   * function's own.
   */
  static Attempt.Exit exitOf(Throwable failure, boolean killed) {
    String story = "failed: " + failure;
    for (Throwable t = failure; t != null; t = t.getCause()) {
      if (t instanceof RetryableException || t instanceof org.apache.spark.shuffle.FetchFailedException) {
        return new Attempt.Exit(Rerun.EX_TEMPFAIL, false, story, List.of());
      }
    }
    for (Throwable t = failure; t != null; t = t.getCause()) {
      if (killed || t instanceof CollectiveException || t instanceof CoordinationException
          || t instanceof PeerUnavailableException || t instanceof DeadlineExceededException
          || t instanceof InterruptedException || t instanceof io.grpc.StatusRuntimeException
          || t instanceof io.muster.ps.ParameterServerUnavailableException) {
        return new Attempt.Exit(1, true, story, List.of());
      }
    }
    return new Attempt.Exit(1, false, story, List.of());
  }

  /**
   * After the task told the driver how it failed: waits for the driver's word that the gang has
   * ended (the driver may wait for the failure's cause, or for the others to save after a preemption
   * notice), so that Spark hears of the failure, and ends the other tasks, only once the verdict stands.
   *
   * @return the driver's word, if it came
   */
  static Optional<String> awaitVerdict(TaskLink link, boolean afterNotice) throws InterruptedException {
    return link.member().awaitAbort((afterNotice ? OnPreemption.SAVED_PEERS_WAIT : Rerun.CAUSE_WINDOW)
        .plus(DRIVERS_WORD));
  }

  /** The address Spark knows this executor by (BarrierTaskInfo.address is "host" or "host:port"). */
  static String executorHost(BarrierTaskContext ctx) {
    String address = ctx.getTaskInfos()[ctx.partitionId()].address();
    int colon = address.lastIndexOf(':');
    return colon > 0 && !address.startsWith("[") && address.indexOf(':') == colon ? address.substring(0, colon) : address;
  }

  /** The CUDA devices Spark assigned this task, remapped through CUDA_VISIBLE_DEVICES; empty for none. */
  static List<String> assignedGpus(BarrierTaskContext ctx, TaskId task, int gpusPerWorker) {
    if (gpusPerWorker == 0) {
      return List.of();
    }
    ResourceInformation gpu = ctx.resourcesJMap().get("gpu");
    if (gpu == null || gpu.addresses().length < gpusPerWorker) {
      throw new IllegalStateException(task + " asked for " + gpusPerWorker
          + " GPU(s) but Spark assigned " + (gpu == null ? "none" : gpu.addresses().length)
          + "; check spark.task.resource.gpu.amount and the executors' GPU discovery script");
    }
    return Gpus.visibleDevices(List.of(gpu.addresses()), System.getenv("CUDA_VISIBLE_DEVICES"));
  }

  /** A private directory for the task in the executor's work directory; the task deletes it when it ends. */
  static Path createWorkDir(TaskId task) {
    Path root = Path.of(SparkFiles.getRootDirectory()).toAbsolutePath();
    try {
      return Files.createTempDirectory(root, "muster-" + task.job() + "-" + task.index() + "-");
    } catch (IOException e) {
      throw new UncheckedIOException(task + ": cannot create its work directory under " + root + ": "
          + e.getMessage(), e);
    }
  }

  static void deleteRecursively(Path dir) {
    try {
      FileTrees.delete(dir);
    } catch (IOException e) {
      log.warn("cannot delete the work directory {}: {}", dir, e.toString());
    }
  }
}
