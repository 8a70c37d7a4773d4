package io.muster.coordinator;

import com.google.common.util.concurrent.ListenableFuture;
import io.grpc.Channel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.cluster.TaskType;
import io.muster.coordination.TaskState;
import io.muster.coordination.TaskStatus;
import io.muster.internal.Durations;
import io.muster.proto.coordinator.ClosureWorkerGrpc;
import io.muster.proto.coordinator.CreateResourceRequest;
import io.muster.proto.coordinator.CreateResourceResponse;
import io.muster.proto.coordinator.PingRequest;
import io.muster.proto.coordinator.RunRequest;
import io.muster.proto.coordinator.RunResponse;
import io.muster.ps.ParameterServerUnavailableException;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The coordinator's thread for one worker, as TensorFlow's {@code Worker}: it takes one closure at
 * a time, runs it there, and hands back the value or the user's error. When the worker fails (the
 * call breaks, or the coordination service declares the worker failed while the call runs), the
 * closure is put back for any worker to run and this thread waits for the worker to come back
 * (registered again with the coordination service and answering), re-creates its per-worker
 * resources, and goes on; after the recovery timeout it gives the worker up.
 */
final class RemoteWorker implements Runnable {

  private static final Logger log = LoggerFactory.getLogger(RemoteWorker.class);
  private static final Duration PING_TIMEOUT = Duration.ofSeconds(2);

  private final int index;
  private final TaskId task;
  private final HostPort address;
  private final ClosureWorkerGrpc.ClosureWorkerFutureStub stub;
  private final ClusterCoordinator coordinator;
  private final ClosureQueue queue;
  private long incarnation;
  private volatile boolean lost;

  RemoteWorker(int index, TaskId task, HostPort address, Channel channel, ClusterCoordinator coordinator,
      ClosureQueue queue, long incarnation) {
    this.index = index;
    this.task = task;
    this.address = address;
    this.stub = ClosureWorkerGrpc.newFutureStub(channel);
    this.coordinator = coordinator;
    this.queue = queue;
    this.incarnation = incarnation;
  }

  TaskId task() {
    return task;
  }

  /** Whether this worker was given up after failing to come back within the recovery timeout. */
  boolean lost() {
    return lost;
  }

  @Override
  public void run() {
    try {
      while (true) {
        Object work = queue.take(index);
        if (work == null) {
          return;
        }
        boolean workerFailed = work instanceof Closure closure ? process(closure) : create((ResourceTask) work);
        if (workerFailed && !recover()) {
          return;
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (RuntimeException e) {
      log.error("the coordinator's thread for {} failed", task, e);
      queue.fatal(new IllegalStateException("the coordinator's thread for " + task + " failed: " + e, e));
    }
  }

  /** Runs one closure; returns whether the worker failed (the closure was put back). */
  private boolean process(Closure closure) throws InterruptedException {
    RunRequest.Builder request = RunRequest.newBuilder().setFunction(closure.function()).setClosure(closure.id());
    for (Object arg : closure.args()) {
      Value value = arg instanceof PerWorkerValues perWorker ? Value.resource(perWorker.id()) : (Value) arg;
      request.addArgs(value.toProto());
    }
    RunResponse response;
    try {
      response = call(stub.run(request.build()));
    } catch (WorkerFailure e) {
      log.warn("{} failed while running {} (closure {}): {}; putting it back", task, closure.function(), closure.id(),
          e.getMessage());
      queue.putBack(closure);
      return true;
    }
    if (response.getError().isEmpty()) {
      closure.output().set(Value.fromProto(response.getResult()));
      queue.finished();
    } else if (response.getErrorKind().equals("ps")) {
      TaskId ps = new TaskId(TaskType.PS.jobName(), response.getPsTask());
      queue.putBack(closure);
      coordinator.parameterServerTrouble(ps, response.getError());
    } else {
      RemoteFunctionException error = new RemoteFunctionException(closure.function(), task, response.getError());
      closure.output().fail(error);
      queue.failed(error);
    }
    return false;
  }

  /** Creates one per-worker resource here; returns whether the worker failed (the task is redone on recovery). */
  private boolean create(ResourceTask resource) throws InterruptedException {
    CreateResourceResponse response;
    try {
      response = call(stub.createResource(CreateResourceRequest.newBuilder().setFunction(resource.function())
          .addAllArgs(resource.args().stream().map(Value::toProto).toList()).setResource(resource.id()).build()));
    } catch (WorkerFailure e) {
      log.warn("{} failed while creating resource {}: {}", task, resource.function(), e.getMessage());
      return true;
    }
    if (response.getError().isEmpty()) {
      resource.created().set(Value.NONE);
    } else {
      RemoteFunctionException error = new RemoteFunctionException(resource.function(), task, response.getError());
      resource.created().fail(error);
      queue.fatal(error);
    }
    return false;
  }

  /**
   * Waits for the call, watching the coordination service's verdict on this worker meanwhile: a
   * worker declared failed (its heartbeats stopped) ends the wait even when the call would hang.
   */
  private <T> T call(ListenableFuture<T> future) throws InterruptedException, WorkerFailure {
    while (true) {
      try {
        return future.get(coordinator.pollInterval().toMillis(), TimeUnit.MILLISECONDS);
      } catch (TimeoutException e) {
        Optional<TaskStatus> state = coordinator.state(task);
        if (state.isPresent() && (state.get().state() == TaskState.ERROR || state.get().incarnation() != incarnation)) {
          future.cancel(true);
          throw new WorkerFailure("the coordination service reports " + task + " " + describe(state.get()));
        }
        if (queue.isFatal()) {
          future.cancel(true);
          throw new InterruptedException("the job failed");
        }
      } catch (ExecutionException e) {
        Throwable cause = e.getCause();
        if (cause instanceof StatusRuntimeException s && s.getStatus().getCode() == Status.Code.UNAUTHENTICATED) {
          throw new IllegalStateException(task + " refused the coordinator's call: " + s.getStatus().getDescription());
        }
        throw new WorkerFailure(cause instanceof StatusRuntimeException s
            ? s.getStatus().getCode() + " " + s.getStatus().getDescription() : String.valueOf(cause));
      }
    }
  }

  /**
   * Waits until the worker is registered with the coordination service again and answers; a new
   * incarnation gets its per-worker resources created again. Returns false when the worker did not
   * come back within the recovery timeout, or the job ended meanwhile.
   */
  private boolean recover() throws InterruptedException {
    Duration timeout = coordinator.recoveryTimeout();
    long deadline = System.nanoTime() + timeout.toNanos();
    long nextLog = System.nanoTime();
    while (System.nanoTime() < deadline) {
      if (queue.isFatal() || coordinator.isClosed()) {
        return false;
      }
      Optional<TaskStatus> state = coordinator.state(task);
      if (state.isPresent() && state.get().state() == TaskState.CONNECTED) {
        Long answered = ping();
        if (answered != null && answered == state.get().incarnation()) {
          if (answered != incarnation) {
            incarnation = answered;
            List<ResourceTask> resources = coordinator.resourceTasksFor(index);
            log.info("{} is back (a new incarnation); creating its {} per-worker resources again", task,
                resources.size());
            resources.forEach(r -> queue.putResourceTask(index, r));
          } else {
            log.info("{} answers again", task);
          }
          return true;
        }
      }
      if (System.nanoTime() >= nextLog) {
        log.info("waiting up to {} for {} at {} to come back ({})", timeout, task, address,
            state.map(RemoteWorker::describe).orElse("state unknown"));
        nextLog = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      }
      Thread.sleep(Math.min(200, coordinator.pollInterval().toMillis()));
    }
    lost = true;
    log.error("{} at {} did not come back within {}; no more closures go to it", task, address,
        Durations.words(timeout));
    coordinator.workerLost(task);
    return false;
  }

  /** The incarnation the worker reports, null when it does not answer. */
  private Long ping() {
    try {
      return stub.withDeadlineAfter(PING_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS).ping(PingRequest.getDefaultInstance())
          .get().getIncarnation();
    } catch (ExecutionException e) {
      return null;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return null;
    }
  }

  private static String describe(TaskStatus status) {
    return status.state() == TaskState.ERROR ? "in error: " + status.error().orElse("") : status.state().toString();
  }

  /** The worker, not the function, failed. */
  private static final class WorkerFailure extends Exception {
    WorkerFailure(String message) {
      super(message);
    }
  }
}
