package io.muster.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.muster.cluster.TaskId;
import io.muster.rpc.JobToken;
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
}
