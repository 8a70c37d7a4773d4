package io.muster.yarn;

import io.grpc.stub.ServerCallStreamObserver;
import io.muster.cluster.TaskId;
import io.muster.launch.GangEndpoint;
import io.muster.launch.Attempt;
import io.muster.proto.gang.AwaitNextAttemptRequest;
import io.muster.proto.gang.AwaitNextAttemptResponse;
import io.muster.proto.gang.TaskRef;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The master's answers to what only it decides of its executors: whether one that exited from a
 * failed attempt offers its container to the next ({@link MusterClient#KEEP_CONTAINERS}), and the
 * offers themselves, which wait on {@link GangContainers} until the next attempt keeps or declines them.
 */
final class ContainerOffers implements GangEndpoint.Launcher {
  private static final Logger log = LoggerFactory.getLogger(ContainerOffers.class);
  private final boolean keepContainers;
  private final Supplier<GangContainers> current;

  /** @param current the current attempt's containers */
  ContainerOffers(boolean keepContainers, Supplier<GangContainers> current) {
    this.keepContainers = keepContainers;
    this.current = current;
  }

  @Override
  public boolean offersContainer(Attempt attempt) {
    return keepContainers && attempt.failed();
  }

  @Override
  public void awaitNextAttempt(AwaitNextAttemptRequest request,
      ServerCallStreamObserver<AwaitNextAttemptResponse> response) {
    Offer offer = new Offer(request.getTask(), response);
    GangContainers containers = current.get();
    if (!keepContainers) {
      offer.decline("the job keeps no container across attempts (" + MusterClient.KEEP_CONTAINERS + " is false)");
    } else if (!containers.offer(GangEndpoint.taskOf(request.getTask()), offer)) {
      offer.decline(containers.attempt() + " has not failed");
    }
  }

  /** An executor's waiting call, answered once. */
  private static final class Offer implements GangContainers.Offer {
    private final TaskRef from;
    private final ServerCallStreamObserver<AwaitNextAttemptResponse> call;
    private final AtomicBoolean answered = new AtomicBoolean();

    Offer(TaskRef from, ServerCallStreamObserver<AwaitNextAttemptResponse> call) {
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
          log.debug("the answer to {}'s offer did not reach it: {}", GangEndpoint.taskOf(from), e.toString());
        }
      }
    }
  }
}
