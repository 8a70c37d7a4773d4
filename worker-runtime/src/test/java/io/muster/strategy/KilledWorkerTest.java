package io.muster.strategy;

import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.ClusterSpec;
import io.muster.cluster.TaskId;
import io.muster.cluster.TfConfig;
import io.muster.rpc.JobToken;
import io.muster.testing.ChildJvm;
import io.muster.testing.LocalCluster;
import io.muster.testing.MirroredLoop;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Three workers training with {@link MultiWorkerMirroredStrategy}, each a child JVM with the
 * default options (10 s heartbeat timeout, 1 min shutdown barrier); worker 1 is killed with
 * SIGKILL. Every survivor exits, naming worker 1, well before the heartbeat timeout could have
 * declared it failed: the survivors learnt of the death from their broken streams. The bound is
 * not the speed target (gone within 2 s), which {@code bench/kill-trials.py} measures; it is what
 * tells the two mechanisms apart (waiting for the heartbeat timeout took 5.8 to 12.6 s).
 */
class KilledWorkerTest {

  /** Half the heartbeat timeout: well past the 2 s target, short of any wait for the heartbeat timeout. */
  private static final Duration BEFORE_THE_HEARTBEAT_TIMEOUT = Duration.ofSeconds(5);

  @Test
  void survivorsOfAKilledWorkerExitBeforeTheHeartbeatTimeoutNamingIt() throws Exception {
    // three distinct ports: each socket stays open until all are chosen, or one could come twice
    List<ServerSocket> held = new ArrayList<>();
    List<String> addresses = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      held.add(new ServerSocket(0));
      addresses.add("127.0.0.1:" + held.get(i).getLocalPort());
    }
    for (ServerSocket socket : held) {
      socket.close();
    }
    ClusterSpec cluster = ClusterSpec.of(Map.of("worker", addresses));
    List<ChildJvm> workers = new ArrayList<>();
    try {
      for (int i = 0; i < 3; i++) {
        workers.add(ChildJvm.start("mirrored-" + i, MirroredLoop.class, List.of(),
            Map.of("TF_CONFIG", TfConfig.of(cluster, new TaskId("worker", i)).toJson(),
                JobToken.ENV, LocalCluster.TOKEN.value()), Path.of("target", "child-logs")));
      }
      for (ChildJvm worker : workers) {
        worker.awaitOutput("READY", Duration.ofSeconds(60));
      }
      Thread.sleep(500); // training, well past the set-up
      long killed = System.nanoTime();
      workers.get(1).kill();
      for (int i : new int[] {0, 2}) {
        int exit = workers.get(i).waitFor(Duration.ofSeconds(30)); // a hang guard
        Duration took = Duration.ofNanos(System.nanoTime() - killed);
        System.out.println("worker " + i + " exited with " + exit + " " + took.toMillis() + " ms after SIGKILL of worker 1");
        assertNotEquals(0, exit, workers.get(i).output());
        assertTrue(took.compareTo(BEFORE_THE_HEARTBEAT_TIMEOUT) < 0, "worker " + i + " took " + took + " to exit, "
            + "as if it had waited for the heartbeat timeout; its output:\n" + workers.get(i).output());
        assertTrue(workers.get(i).output().contains("worker 1"), "the error names the dead worker:\n"
            + workers.get(i).output());
      }
    } finally {
      workers.forEach(ChildJvm::close);
    }
  }
}
