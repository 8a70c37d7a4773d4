package io.muster.spark;

import io.muster.cluster.HostPort;
import io.muster.launch.GangSpec;
import io.muster.internal.rpc.Reachability;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.SparkExecutorInfo;
import org.apache.spark.scheduler.ExecutorProcessLost;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.SparkListenerTaskStart;
import org.apache.spark.scheduler.TaskInfo;
import org.apache.spark.scheduler.TaskSchedulerImpl;
import org.apache.spark.scheduler.cluster.CoarseGrainedSchedulerBackend;
import org.apache.spark.storage.BlockManagerId;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The driver's view of one gang run's barrier job while its gang forms: which member Spark started
 * on which executor and host (from the listener bus), what the host of a member that never joined
 * answers to a probe of its executor, and the cancel of the job when the gang's deadline passes.
 * The run's jobs are found by a local property set on the thread that submits them.
 */
final class GangStartWatch extends SparkListener implements AutoCloseable {
  private static final String RUN = "muster.gang.run";
  private static final Logger log = LoggerFactory.getLogger(GangStartWatch.class);
  private static final Duration PROBE = Duration.ofSeconds(2);
  private static final Duration SLOTS_POLL = Duration.ofMillis(50);
  /** How long a re-run waits for Spark to drop the executors it removed as silent. */
  private static final Duration REMOVAL = Duration.ofSeconds(10);
  /** Executors probed at once when the gang's deadline passes. */
  private static final int MAX_PROBES = 32;

  private final SparkContext sc;
  private final GangSpec gang;
  private final String run = UUID.randomUUID().toString();
  private final Map<Integer, Integer> resultStageOfJob = new ConcurrentHashMap<>();
  private final Map<Integer, TaskInfo> started = new ConcurrentHashMap<>();

  private GangStartWatch(SparkContext sc, GangSpec gang) {
    this.sc = sc;
    this.gang = gang;
  }

  /** Watches the barrier jobs that {@code job} submits from this thread, and cancels them on a timeout. */
  static <R> R around(SparkContext sc, GangSpec gang, Function<GangStartWatch, R> job) {
    GangStartWatch watch = new GangStartWatch(sc, gang);
    String previous = sc.getLocalProperty(RUN);
    sc.addSparkListener(watch);
    sc.setLocalProperty(RUN, watch.run);
    try {
      return job.apply(watch);
    } finally {
      sc.setLocalProperty(RUN, previous);
      watch.close();
    }
  }

  /**
   * Waits, until {@code deadline} at most, for the application's executors to hold task slots for
   * the whole gang. A barrier job submitted before they have registered fails Spark's slot check,
   * which Spark repeats only every {@code spark.scheduler.barrier.maxConcurrentTasksCheck.interval}
   * (15 s): on a cluster whose executors were still starting, that was most of a gang's start. The
   * count is the one that check uses.
   */
  static void awaitSlots(SparkContext sc, int gangSize, long deadline) {
    try {
      while (sc.maxNumConcurrentTasks(sc.resourceProfileManager().defaultResourceProfile()) < gangSize
          && System.nanoTime() < deadline) {
        Thread.sleep(SLOTS_POLL.toMillis());
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (LinkageError | RuntimeException e) { // Spark's own (package-private in Scala) count moved: do not wait
      log.debug("cannot count the application's task slots; submitting the gang without waiting for them", e);
    }
  }

  /**
   * Waits, for {@code limit} at most, until the application has task slots free for the whole gang
   * at once: its executors' slots less the tasks the scheduler counts running on them (a task on a
   * host cut off holds its slot until Spark declares the executor lost).
   *
   * @param attempt the gang run, in words, for the progress line
   * @param setting what sets {@code limit}, for the failure
   * @param removed the executors removed as silent, in words, named with the others
   * @throws SlotsNotFreeException when they are not free by then, naming every executor
   */
  static void awaitFreeSlots(SparkContext sc, int gangSize, String attempt, Duration limit, String setting,
      List<String> removed) {
    int free = freeSlots(sc);
    if (free >= gangSize) {
      return;
    }
    log.warn("{}: the gang needs {} free task slots at once, {} are free (executors: {}); waiting up to {} s for them",
        attempt, gangSize, free, describe(sc, executors(sc), removed), limit.toSeconds());
    long deadline = System.nanoTime() + limit.toNanos();
    try {
      while (free < gangSize && System.nanoTime() < deadline) {
        Thread.sleep(SLOTS_POLL.toMillis());
        free = freeSlots(sc);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new SlotsNotFreeException("interrupted while waiting for " + gangSize + " free task slots");
    }
    if (free < gangSize) {
      throw new SlotsNotFreeException("the gang needs " + gangSize + " free task slots at once, and " + free + " were "
          + "free after " + limit.toSeconds() + " s (" + setting + "): executors: "
          + describe(sc, executors(sc), removed));
    }
    log.info("{}: {} task slots are free; starting the gang", attempt, free);
  }

  /**
   * After a gang failed: removes from the application every executor that Spark still counts
   * running a task on and that answers no connection, a host that went down or was cut off. Spark
   * itself would hold its slot, and send the next job's shuffle reads to it, until it declares the
   * executor lost ({@code spark.network.timeout}, 120 s); a barrier stage cannot recover from such a
   * read. Once it is removed, Spark recomputes the shuffle outputs it held on the healthy executors,
   * and should the host come back, the executor is refused and exits. Waits for the removal,
   * {@link #REMOVAL} at most. Does nothing in local mode or where Spark's (package-private in Scala)
   * scheduler API moved.
   *
   * @param attempt the gang run about to start, in words, for the log
   * @return each executor removed, in words
   */
  static List<String> removeSilentExecutors(SparkContext sc, String attempt) {
    List<BlockManagerId> busy = new ArrayList<>();
    CoarseGrainedSchedulerBackend backend;
    try {
      if (!(sc.schedulerBackend() instanceof CoarseGrainedSchedulerBackend b)) {
        return List.of();
      }
      backend = b;
      Map<String, Object> running = runningByExecutorId(sc);
      for (BlockManagerId id : CollectionConverters.asJava(SparkEnv.get().blockManager().master().getMemoryStatus())
          .keySet()) {
        if ((Integer) running.getOrDefault(id.executorId(), 0) > 0) {
          busy.add(id);
        }
      }
    } catch (LinkageError | RuntimeException e) {
      log.debug("cannot list the executors still running tasks; not checking them for silent hosts", e);
      return List.of();
    }
    ExecutorService probes = Executors.newFixedThreadPool(Math.min(MAX_PROBES, Math.max(1, busy.size())));
    Set<String> removed = new HashSet<>();
    List<String> described = new ArrayList<>();
    try {
      List<Future<Reachability.Answer>> answers = busy.stream().map(id -> probes.submit(() ->
          Reachability.probe(new HostPort(id.host(), id.port()), PROBE))).toList();
      for (int i = 0; i < busy.size(); i++) {
        Reachability.Answer answer = answers.get(i).get();
        BlockManagerId id = busy.get(i);
        if (!(answer instanceof Reachability.Listening)) {
          log.warn("{}: executor {} on {} still runs a task of the failed gang and does not answer ({}); removing it "
              + "from the application, so that the re-run neither waits for its slot nor reads its shuffle outputs",
              attempt, id.executorId(), id.host(), answer);
          backend.removeExecutor(id.executorId(), new ExecutorProcessLost("Muster: " + id.host() + " does not answer ("
              + answer + ") after its gang failed", scala.Option.empty(), false));
          removed.add(id.host() + ":" + id.port());
          described.add(id.host() + ":" + id.port() + " not answering (" + answer + "), removed");
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return described;
    } catch (ExecutionException | LinkageError | RuntimeException e) {
      log.debug("could not check or remove the executors still running tasks", e);
      return described;
    } finally {
      probes.shutdownNow();
    }
    // Spark lists an executor as removed once its scheduler has dropped it and its shuffle outputs.
    long deadline = System.nanoTime() + REMOVAL.toNanos();
    try {
      while (executors(sc).stream().anyMatch(e -> removed.contains(e.host() + ":" + e.port()))) {
        if (System.nanoTime() > deadline) {
          log.warn("{}: Spark still lists the executors removed ({}) after {} s; starting the gang", attempt, removed,
              REMOVAL.toSeconds());
          break;
        }
        Thread.sleep(SLOTS_POLL.toMillis());
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    return described;
  }

  /** Task slots free for a barrier stage now; unbounded where Spark's (package-private in Scala) API moved. */
  private static int freeSlots(SparkContext sc) {
    try {
      int running = runningByExecutorId(sc).values().stream().mapToInt(tasks -> (Integer) tasks).sum();
      return sc.maxNumConcurrentTasks(sc.resourceProfileManager().defaultResourceProfile()) - running;
    } catch (LinkageError | RuntimeException e) {
      log.debug("cannot count the application's free task slots; submitting the gang without waiting for them", e);
      return Integer.MAX_VALUE;
    }
  }

  /** Too few task slots came free for a re-run of the gang: a wait a further re-run would repeat. */
  static final class SlotsNotFreeException extends IllegalStateException {
    SlotsNotFreeException(String message) {
      super(message);
    }
  }

  @Override
  public void onJobStart(SparkListenerJobStart jobStart) {
    if (run.equals(jobStart.properties() == null ? null : jobStart.properties().getProperty(RUN))) {
      // The barrier stage is the job's result stage, the last one created.
      int resultStage = CollectionConverters.asJava(jobStart.stageIds()).stream().mapToInt(id -> (Integer) id).max()
          .orElse(-1);
      resultStageOfJob.put(jobStart.jobId(), resultStage);
    }
  }

  @Override
  public void onTaskStart(SparkListenerTaskStart taskStart) {
    if (resultStageOfJob.containsValue(taskStart.stageId())) {
      started.put(taskStart.taskInfo().index(), taskStart.taskInfo());
    }
  }

  /** Ends the run's jobs, with {@code reason} as Spark's cancel reason. */
  void cancel(String reason) {
    resultStageOfJob.keySet().forEach(job -> sc.cancelJob(job, reason));
  }

  /** What the driver knows of the members that have not joined, in words. */
  String explainMissing(List<Integer> members) {
    List<SparkExecutorInfo> executors = executors(sc);
    List<String> parts = new ArrayList<>();
    List<String> notStarted = new ArrayList<>();
    long now = System.currentTimeMillis();
    for (int member : members) {
      TaskInfo task = started.get(member);
      if (task == null) {
        notStarted.add(gang.task(member).toString());
      } else {
        parts.add(gang.task(member) + " was started on " + task.host() + " (executor " + task.executorId() + ") "
            + Math.max(0, (now - task.launchTime()) / 1000) + " s ago and has not joined; " + probe(task.host(), executors));
      }
    }
    if (!notStarted.isEmpty()) {
      parts.add(String.join(", ", notStarted) + (notStarted.size() == 1 ? " was" : " were") + " not started by Spark, "
          + "which starts a barrier stage only when it has " + gang.size() + " free task slots at once (executors: "
          + describe(sc, executors, List.of()) + ")");
    }
    return String.join("; ", parts);
  }

  /** The scheduler's running tasks per executor id (counts as Scala boxes them); throws where its API moved. */
  private static Map<String, Object> runningByExecutorId(SparkContext sc) {
    return CollectionConverters.asJava(((TaskSchedulerImpl) sc.taskScheduler()).runningTasksByExecutors());
  }

  private static List<SparkExecutorInfo> executors(SparkContext sc) {
    return Arrays.asList(sc.statusTracker().getExecutorInfos());
  }

  /**
   * Each executor with its running tasks, or what it answered when it does not answer, then the
   * {@code removed} ones; the driver left out.
   */
  private static String describe(SparkContext sc, List<SparkExecutorInfo> executors, List<String> removed) {
    BlockManagerId driver = SparkEnv.get().blockManager().blockManagerId();
    List<SparkExecutorInfo> listed = executors.size() == 1 ? executors : executors.stream()
        .filter(e -> !(e.host().equals(driver.host()) && e.port() == driver.port())).toList();
    Map<String, Integer> running = runningTasks(sc);
    ExecutorService probes = Executors.newFixedThreadPool(Math.min(MAX_PROBES, Math.max(1, listed.size())));
    try {
      List<Future<String>> described = listed.stream().map(e -> probes.submit(() -> {
        if (e.port() == 0) {
          return e.host() + " not ready";
        }
        Reachability.Answer answer = Reachability.probe(new HostPort(e.host(), e.port()), PROBE);
        return e.host() + ":" + e.port() + (answer instanceof Reachability.Listening
            ? " running " + running.getOrDefault(e.host() + ":" + e.port(), e.numRunningTasks())
            : " not answering (" + answer + ")");
      })).toList();
      List<String> out = new ArrayList<>();
      for (Future<String> d : described) {
        out.add(d.get());
      }
      out.addAll(removed);
      return String.join(", ", out);
    } catch (InterruptedException | ExecutionException e) {
      return listed.stream().map(x -> x.host() + ":" + x.port()).collect(Collectors.joining(", "));
    } finally {
      probes.shutdownNow();
    }
  }

  /**
   * Each executor's running tasks by its block manager's host:port (the address the status tracker
   * lists), as the scheduler counts them now. The status tracker's own count is the UI's, which
   * Spark writes at most every {@code spark.ui.liveUpdatePeriod} and otherwise at the next
   * heartbeat: an executor that started a task a moment after its last write shows it idle for
   * seconds. Empty where Spark's (package-private in Scala) scheduler API moved.
   */
  private static Map<String, Integer> runningTasks(SparkContext sc) {
    try {
      Map<String, Object> byExecutor = runningByExecutorId(sc);
      Map<String, Integer> running = new HashMap<>();
      for (BlockManagerId id : CollectionConverters.asJava(SparkEnv.get().blockManager().master().getMemoryStatus())
          .keySet()) {
        running.put(id.host() + ":" + id.port(), (Integer) byExecutor.getOrDefault(id.executorId(), 0));
      }
      return running;
    } catch (LinkageError | RuntimeException e) {
      log.debug("cannot count the executors' running tasks from the scheduler; taking the status tracker's", e);
      return Map.of();
    }
  }

  /** What the executors Spark lists on {@code host} answer to a connection attempt. */
  private static String probe(String host, List<SparkExecutorInfo> executors) {
    List<SparkExecutorInfo> there = executors.stream().filter(e -> e.host().equals(host)).toList();
    if (there.isEmpty()) {
      return "Spark no longer lists an executor on " + host + " (lost?)";
    }
    HostPort executor = new HostPort(host, there.get(0).port());
    Reachability.Answer answer = Reachability.probe(executor, PROBE);
    if (answer instanceof Reachability.Listening) {
      return "its executor at " + executor + " answers, so the task is still starting (reading its partition?) or stuck";
    }
    return "its executor at " + executor + ": " + answer
        + (answer.silent() ? " (the host is down or cut off from the driver)" : "");
  }

  @Override
  public void close() {
    sc.removeSparkListener(this);
  }
}
