package io.muster.yarn;

import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.launch.EndOfJob;
import io.muster.proto.gang.AwaitGangRequest;
import io.muster.proto.gang.AwaitGangResponse;
import io.muster.proto.gang.AwaitNextAttemptRequest;
import io.muster.proto.gang.AwaitNextAttemptResponse;
import io.muster.proto.gang.ExitedRequest;
import io.muster.proto.gang.ExitedResponse;
import io.muster.proto.gang.GangServiceGrpc;
import io.muster.proto.gang.HeartbeatRequest;
import io.muster.proto.gang.HeartbeatResponse;
import io.muster.proto.gang.RegisterRequest;
import io.muster.proto.gang.RegisterResponse;
import io.muster.proto.gang.TaskRef;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The ApplicationMaster's end of {@code muster.GangService}, served behind the job-token check on
 * the master's task server. A call from an executor of an earlier attempt, or for a container
 * the master did not give that task, is refused ({@code FAILED_PRECONDITION}).
 */
final class GangEndpoint extends GangServiceGrpc.GangServiceImplBase {

  private static final Logger log = LoggerFactory.getLogger(GangEndpoint.class);
  private final AtomicReference<Attempt> current = new AtomicReference<>();
  /** Whether a failed attempt's containers are offered to the next ({@link MusterClient#KEEP_CONTAINERS}). */
  private final boolean keepContainers;

  GangEndpoint(boolean keepContainers) {
    this.keepContainers = keepContainers;
  }

  void start(Attempt attempt) {
    current.set(attempt);
  }

  @Override
  public void register(RegisterRequest request, StreamObserver<RegisterResponse> response) {
    Attempt attempt = attemptOf(request.getTask(), response);
    if (attempt == null) {
      return;
    }
    HostPort address;
    try {
      address = HostPort.parse(request.getAddress());
    } catch (IllegalArgumentException e) {
      response.onError(Status.INVALID_ARGUMENT.withDescription(e.getMessage()).asRuntimeException());
      return;
    }
    TaskId task = taskOf(request.getTask());
    attempt.register(task, address);
    log.info("attempt {}: {} registered at {}{}", attempt.number + 1, task, address,
        attempt.formed() ? "; the gang is complete" : "");
    response.onNext(RegisterResponse.getDefaultInstance());
    response.onCompleted();
  }

  @Override
  public void awaitGang(AwaitGangRequest request, StreamObserver<AwaitGangResponse> response) {
    Attempt attempt = attemptOf(request.getTask(), response);
    if (attempt == null) {
      return;
    }
    try {
      var addresses = attempt.awaitGang();
      if (addresses.isPresent()) {
        response.onNext(AwaitGangResponse.newBuilder()
            .addAllAddresses(addresses.get().stream().map(HostPort::toString).toList()).build());
        response.onCompleted();
      } else {
        response.onError(attempt.abortReason()
            .map(r -> Status.ABORTED.withDescription("attempt " + (attempt.number + 1) + " was aborted: " + r))
            .orElse(Status.DEADLINE_EXCEEDED.withDescription("the gang did not form in time: "
                + attempt.formationReport(Map.of()))).asRuntimeException());
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      response.onError(Status.CANCELLED.withDescription("the master is stopping").asRuntimeException());
    }
  }

  @Override
  public void heartbeat(HeartbeatRequest request, StreamObserver<HeartbeatResponse> response) {
    Attempt attempt = attemptOf(request.getTask(), response);
    if (attempt == null) {
      return;
    }
    TaskId task = taskOf(request.getTask());
    attempt.heard(task);
    HeartbeatResponse.Builder reply = HeartbeatResponse.newBuilder();
    if (attempt.abortReason().isPresent()) {
      reply.setAction(HeartbeatResponse.Action.ABORT).setReason(attempt.abortReason().get());
    } else if (attempt.shouldEnd(task)) {
      reply.setAction(HeartbeatResponse.Action.END).setReason("the tasks the job awaits have all finished");
    } else {
      attempt.preemptionToDeliver()
          .ifPresent(notice -> reply.setAction(HeartbeatResponse.Action.PREEMPT).setReason(notice));
    }
    response.onNext(reply.build());
    response.onCompleted();
  }

  @Override
  public void exited(ExitedRequest request, StreamObserver<ExitedResponse> response) {
    Attempt attempt = attemptOf(request.getTask(), response);
    if (attempt == null) {
      return;
    }
    TaskId task = taskOf(request.getTask());
    EndOfJob.Verdict verdict = attempt.exited(task, request.getExitCode(), request.getStderrTailList(),
        request.getEndedByRequest());
    log.info("attempt {}: {} exited with code {}{}; the job is {}", attempt.number + 1, task, request.getExitCode(),
        request.getEndedByRequest() ? " (ended by the master)" : "", describe(verdict));
    response.onNext(ExitedResponse.newBuilder().setOfferContainer(keepContainers && attempt.failed()).build());
    response.onCompleted();
  }

  /** Holds the call until the master starts the next attempt with this container, or has no use for it. */
  @Override
  public void awaitNextAttempt(AwaitNextAttemptRequest request, StreamObserver<AwaitNextAttemptResponse> response) {
    Attempt attempt = attemptOf(request.getTask(), response);
    if (attempt == null) {
      return;
    }
    ContainerOffer offer = new ContainerOffer(request.getTask(),
        (ServerCallStreamObserver<AwaitNextAttemptResponse>) response);
    if (!keepContainers) {
      offer.decline("the job keeps no container across attempts (" + MusterClient.KEEP_CONTAINERS + " is false)");
    } else if (!attempt.offer(taskOf(request.getTask()), offer)) {
      offer.decline("attempt " + (attempt.number + 1) + " has not failed");
    }
  }

  /** An executor's waiting call, answered once. */
  private static final class ContainerOffer implements Attempt.Offer {
    private final TaskRef from;
    private final ServerCallStreamObserver<AwaitNextAttemptResponse> call;
    private final AtomicBoolean answered = new AtomicBoolean();

    ContainerOffer(TaskRef from, ServerCallStreamObserver<AwaitNextAttemptResponse> call) {
      this.from = from;
      this.call = call;
    }

    @Override
    public boolean waiting() {
      return !answered.get() && !call.isCancelled();
    }

    @Override
    public void accept(TaskId task, int attempt) {
      answer(AwaitNextAttemptResponse.newBuilder().setNext(from.toBuilder().setJob(task.job()).setIndex(task.index())
          .setAttempt(attempt)).build());
    }

    @Override
    public void decline(String reason) {
      answer(AwaitNextAttemptResponse.newBuilder().setReason(reason).build());
    }

    private void answer(AwaitNextAttemptResponse answer) {
      if (answered.compareAndSet(false, true) && !call.isCancelled()) {
        try {
          call.onNext(answer);
          call.onCompleted();
        } catch (RuntimeException e) { // the executor gave up meanwhile
          log.debug("the answer to {}'s offer did not reach it: {}", taskOf(from), e.toString());
        }
      }
    }
  }

  static String describe(EndOfJob.Verdict verdict) {
    if (verdict instanceof EndOfJob.Succeeded done) {
      return "done" + (done.toEnd().isEmpty() ? "" : ", ending " + done.toEnd());
    }
    return verdict instanceof EndOfJob.Failed failed ? "failed (" + failed.task() + ")" : "running";
  }

  static TaskId taskOf(TaskRef ref) {
    return new TaskId(ref.getJob(), ref.getIndex());
  }

  private Attempt attemptOf(TaskRef ref, StreamObserver<?> response) {
    Attempt attempt = current.get();
    TaskId task;
    try {
      task = taskOf(ref);
    } catch (IllegalArgumentException e) {
      response.onError(Status.INVALID_ARGUMENT.withDescription(e.getMessage()).asRuntimeException());
      return null;
    }
    if (attempt == null || attempt.number != ref.getAttempt() || !attempt.isCurrent(task, ref.getContainerId())) {
      response.onError(Status.FAILED_PRECONDITION.withDescription(task + " in container " + ref.getContainerId()
          + " belongs to attempt " + (ref.getAttempt() + 1) + ", which is not the master's current attempt"
          + (attempt == null ? "" : " (" + (attempt.number + 1) + ")")).asRuntimeException());
      return null;
    }
    return attempt;
  }
}
