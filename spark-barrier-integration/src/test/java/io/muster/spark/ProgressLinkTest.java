package io.muster.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.TaskId;
import io.muster.rpc.JobToken;
import io.muster.testing.Eventually;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;

/** The progress lines of in-JVM training, over a real TCP connection on 127.0.0.1. */
class ProgressLinkTest {

  private static final String TOKEN = "00112233445566778899aabbccddeeff";

  @Test
  void aTasksLinesReachTheDriverAsWrittenAndAStrangersAreRefused() {
    List<String> received = new CopyOnWriteArrayList<>();
    try (ProgressLink.Receiver driver = ProgressLink.Receiver.start("127.0.0.1", "127.0.0.1", JobToken.of(TOKEN),
        received::add)) {
      try (ProgressLink.Sender stranger = ProgressLink.Sender.connect(driver.address(), "ffeeddccbbaa99887766554433221100",
          new TaskId("worker", 9))) {
        stranger.send("not this job's");
      }
      try (ProgressLink.Sender chief = ProgressLink.Sender.connect(driver.address(), TOKEN, new TaskId("worker", 0))) {
        chief.send("epoch 1/2: loss 0.5");
        chief.send("two\nlines with a \\ backslash");
      }
    } // closing waits for the lines still on their way
    assertEquals(List.of("epoch 1/2: loss 0.5", "two\nlines with a \\ backslash"), received);
  }

  /**
   * A task on a host cut off sends nothing more, not even its end: closing does not wait for its
   * connection, while a task that is still sending when the close begins has every line delivered.
   */
  @Test
  void closingWaitsForATaskStillSendingButNotForOneThatHasGoneQuiet() throws Exception {
    List<String> received = new CopyOnWriteArrayList<>();
    ProgressLink.Receiver driver = ProgressLink.Receiver.start("127.0.0.1", "127.0.0.1", JobToken.of(TOKEN),
        received::add);
    try (ProgressLink.Sender cutOff = ProgressLink.Sender.connect(driver.address(), TOKEN, new TaskId("worker", 1));
        ProgressLink.Sender chief = ProgressLink.Sender.connect(driver.address(), TOKEN, new TaskId("worker", 0))) {
      cutOff.send("worker 1's last line");
      Thread sending = new Thread(() -> {
        for (int i = 1; i <= 8; i++) { // over READ_REMAINING's first second, a line every 250 ms
          sleep(Duration.ofMillis(250));
          chief.send("line " + i);
        }
        chief.close();
      });
      Eventually.within(Duration.ofSeconds(10), "worker 1's line", () -> received.contains("worker 1's last line"));
      sending.start();
      long start = System.nanoTime();
      driver.close(); // worker 1's connection stays open and silent, as a cut host's does
      Duration closing = Duration.ofNanos(System.nanoTime() - start);
      assertEquals(List.of("worker 1's last line", "line 1", "line 2", "line 3", "line 4", "line 5", "line 6", "line 7",
          "line 8"), received);
      // a hang guard, not a speed target: closing waited for the chief's two seconds, not READ_REMAINING's five
      assertTrue(closing.compareTo(Duration.ofMillis(4500)) < 0, "closing took " + closing);
    }
  }

  private static void sleep(Duration duration) {
    try {
      Thread.sleep(duration.toMillis());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
