package io.muster.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.testing.PythonTensorFlow;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code muster submit --local}: a YARN cluster and HDFS in this JVM, the job submitted to them,
 * followed to its end, and the containers' logs printed. The command is real TensorFlow 2.21.
 */
class SubmitLocalTest {

  @Test
  void realTensorFlowMultiWorkerMirroredStrategyOnTwoYarnWorkers(@TempDir Path tmp) throws Exception {
    Path python = PythonTensorFlow.python();
    Path script = PythonTensorFlow.script("mwms_train.py", tmp);
    Path out = tmp.resolve("out");
    ByteArrayOutputStream stdout = new ByteArrayOutputStream();
    ByteArrayOutputStream stderr = new ByteArrayOutputStream();
    int code = Muster.run(List.of("submit", "--local", "--name", "mwms", "--worker-instances", "2",
        "--worker-memory", "2g", "--gang-timeout", "5m", "--app-timeout", "10m", "--output-dir", out.toString(),
        "--command", python + " " + script), Map.of(), new PrintStream(stdout, true), new PrintStream(stderr, true));
    String printed = stdout.toString(StandardCharsets.UTF_8);

    assertEquals(0, code, printed + stderr.toString(StandardCharsets.UTF_8));
    assertTrue(printed.contains(" SUCCEEDED: succeeded on attempt 1 of 1"), printed);
    List<String> digests = printed.lines().filter(l -> l.startsWith("weights-sha256 ")).map(l -> l.split(" ")[1])
        .toList();
    assertEquals(2, digests.size(), "each worker printed its weights: " + printed);
    assertEquals(digests.get(0), digests.get(1), "both workers end with the same weights");
    assertTrue(Files.exists(out.resolve("checkpoint")) && Files.exists(out.resolve("ckpt-1.index")),
        "the chief's checkpoint is in the output directory");
    try (Stream<Path> files = Files.list(out)) {
      assertTrue(files.noneMatch(p -> p.getFileName().toString().startsWith("workertemp")),
          "the other worker's temporary checkpoint is gone");
    }
  }
}
