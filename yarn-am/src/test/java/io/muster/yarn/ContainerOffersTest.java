package io.muster.yarn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.cluster.TaskType;
import io.muster.internal.rpc.ChannelCache;
import io.muster.internal.rpc.TaskServer;
import io.muster.launch.Attempt;
import io.muster.launch.GangEndpoint;
import io.muster.launch.GangMember;
import io.muster.launch.GangSpec;
import io.muster.proto.gang.AwaitNextAttemptRequest;
import io.muster.proto.gang.AwaitNextAttemptResponse;
import io.muster.proto.gang.GangServiceGrpc;
import io.muster.proto.gang.TaskRef;
import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import io.muster.testing.Eventually;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.hadoop.yarn.api.records.Container;
import org.apache.hadoop.yarn.api.records.ContainerId;
import org.apache.hadoop.yarn.api.records.NodeId;
import org.apache.hadoop.yarn.api.records.Priority;
import org.apache.hadoop.yarn.api.records.Resource;
import org.junit.jupiter.api.Test;

/** A failed attempt's executors offering their containers to the next, over the master's real endpoint on 127.0.0.1. */
class ContainerOffersTest {

  private static final JobToken TOKEN = JobToken.of("the-jobs-token-0123456789");

  private static TaskRef ref(int index, int attempt, String container) {
    return TaskRef.newBuilder().setJob("worker").setIndex(index).setAttempt(attempt).setContainerId(container).build();
  }

  private static Container container(String id) {
    return Container.newInstance(ContainerId.fromString(id), NodeId.newInstance("h", 8041), "h:8042",
        Resource.newInstance(128, 1), Priority.newInstance(ContainerLauncher.priority(TaskType.WORKER)), null);
  }

  private static final String C0 = "container_1_0001_01_000002";
  private static final String C1 = "container_1_0001_01_000003";

  /** Attempt {@code number} of two workers, in containers C0 and C1 on host h. */
  private static GangContainers twoWorkers(int number) {
    GangContainers containers = new GangContainers(new Attempt(number, GangSpec.workers(2), Duration.ofMinutes(1), 42,
        Clock.systemUTC()));
    for (String id : List.of(C0, C1)) {
      Container c = container(id);
      containers.add(containers.attempt().assign(TaskType.WORKER, GangContainers.Held.placement(c)).orElseThrow(), c);
    }
    return containers;
  }

  /** The master's endpoint, its task server, and executors' channels. */
  private static final class Master implements AutoCloseable {
    final AtomicReference<GangContainers> current = new AtomicReference<>();
    final GangEndpoint endpoint;
    final TaskServer server = TaskServer.start(new TaskId("master", 0), new HostPort("127.0.0.1", 0),
        Security.of(TOKEN));
    final ChannelCache channels = new ChannelCache(Security.of(TOKEN));

    Master(boolean keepContainers) {
      endpoint = new GangEndpoint("container", new ContainerOffers(keepContainers, current::get));
      server.addService(endpoint);
    }

    void start(GangContainers containers) {
      current.set(containers);
      endpoint.start(containers.attempt());
    }

    GangMember join(TaskRef ref, int port) {
      return GangMember.join(channels.get(server.address()), ref, HostPort.parse("h:" + port), "h",
          "the ApplicationMaster at " + server.address(), new GangMember.Listener() { }, Clock.systemUTC());
    }

    Future<AwaitNextAttemptResponse> offer(TaskRef ref) {
      return GangServiceGrpc.newFutureStub(channels.get(server.address())).withDeadlineAfter(10, TimeUnit.SECONDS)
          .awaitNextAttempt(AwaitNextAttemptRequest.newBuilder().setTask(ref).build());
    }

    @Override
    public void close() {
      channels.close();
      server.closeNow();
      endpoint.close();
    }
  }

  /**
   * Worker 1's command fails; the attempt ends and worker 0's command is ended. Each executor is
   * told to offer its container, and waits; the next attempt keeps both containers, and each
   * executor hears its task there and joins the new gang from the same container.
   */
  @Test
  void aFailedAttemptsExecutorsOfferTheirContainersAndHearTheirTaskInTheNextAttempt() throws Exception {
    try (Master master = new Master(true)) {
      GangContainers first = twoWorkers(0);
      master.start(first);
      try (GangMember w0 = master.join(ref(0, 0, C0), 1); GangMember w1 = master.join(ref(1, 0, C1), 2)) {
        w0.awaitGang(Duration.ofSeconds(10));
        assertTrue(w1.exited(Attempt.Exit.ofCommand(137, List.of(), false)), "the attempt failed with worker 1");
        assertTrue(w0.awaitAbort(Duration.ofSeconds(10)).isPresent());
        assertTrue(w0.exited(Attempt.Exit.ofCommand(143, List.of(), true)));
      }
      Future<AwaitNextAttemptResponse> worker0 = master.offer(ref(0, 0, C0));
      Future<AwaitNextAttemptResponse> worker1 = master.offer(ref(1, 0, C1));
      Eventually.within(Duration.ofSeconds(10), "both containers offered", first::allDoneOrOffered);
      assertFalse(worker0.isDone() || worker1.isDone(), "the executors wait for the next attempt");

      GangContainers next = new GangContainers(new Attempt(1, GangSpec.workers(2), Duration.ofMinutes(1), 42,
          Clock.systemUTC()));
      Map<GangContainers.Held, GangContainers.Offer> offered = first.offered();
      offered.keySet().forEach(h -> {
        next.attempt().keep(h.task(), h.placement());
        next.add(h.task(), h.container());
      });
      master.start(next);
      offered.forEach((h, offer) -> offer.accept(h.task(), 1));

      assertEquals(ref(0, 1, C0), worker0.get(10, TimeUnit.SECONDS).getNext());
      assertEquals(ref(1, 1, C1), worker1.get(10, TimeUnit.SECONDS).getNext());
      try (GangMember w0 = master.join(ref(0, 1, C0), 3); GangMember w1 = master.join(ref(1, 1, C1), 4)) {
        assertEquals(List.of(HostPort.parse("h:3"), HostPort.parse("h:4")), w1.awaitGang(Duration.ofSeconds(10)),
            "the kept containers form the next gang");
      }
    }
  }

  /** An executor whose attempt did not fail, or whose job keeps no containers, is told to exit at once. */
  @Test
  void anOfferIsDeclinedAtOnceWhereNoNextAttemptCanWantIt() throws Exception {
    for (boolean keepContainers : List.of(true, false)) {
      try (Master master = new Master(keepContainers)) {
        GangContainers containers = twoWorkers(0);
        master.start(containers);
        if (!keepContainers) {
          containers.attempt().abort(Attempt.Kind.CLUSTER, "worker 1 failed");
        }
        try (GangMember w0 = master.join(ref(0, 0, C0), 1)) {
          assertFalse(w0.exited(Attempt.Exit.ofCommand(0, List.of(), false)), "keep " + keepContainers);
        }
        AwaitNextAttemptResponse answer = master.offer(ref(0, 0, C0)).get(10, TimeUnit.SECONDS);
        assertFalse(answer.hasNext());
        assertEquals(keepContainers ? "attempt 1 has not failed"
            : "the job keeps no container across attempts (muster.yarn.restart.keep-containers is false)",
            answer.getReason());
        assertEquals(Map.of(), containers.offered());
      }
    }
  }
}
