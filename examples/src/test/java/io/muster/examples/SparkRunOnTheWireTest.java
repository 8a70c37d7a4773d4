package io.muster.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.rpc.TlsFiles;
import io.muster.testing.LoopbackCapture;
import io.muster.testing.SelfSignedCertificate;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What {@code muster spark-run} sends across loopback between the driver and its tasks, captured
 * off the wire: with {@code MUSTER_TLS_*} set, neither the run's job token nor a line its command
 * prints crosses in clear, and no gRPC connection is plaintext; without TLS both do, which shows
 * that the capture sees the job's traffic at all.
 */
class SparkRunOnTheWireTest {

  private static final String SCRIPT = "echo \"$MUSTER_JOB_TOKEN\" > \"$TOKEN_DIR/token-$MUSTER_TASK_INDEX\"; "
      + "echo \"a line worker $MUSTER_TASK_INDEX printed\"; echo 'and one on stderr' >&2";

  private record Wire(List<LoopbackCapture.Connection> connections, String token) {}

  private static Wire capture(Path dir, Map<String, String> env) throws Exception {
    Path tokens = Files.createDirectories(dir.resolve("tokens"));
    Map<String, String> all = new HashMap<>(env);
    all.put("TOKEN_DIR", tokens.toString());
    List<LoopbackCapture.Connection> connections;
    MainProcess.Run run;
    try (LoopbackCapture capture = LoopbackCapture.start(dir, Duration.ofMinutes(5))) {
      run = MainProcess.run(SparkRun.class, all, dir, "--workers", "2", "--", "sh", "-c", SCRIPT);
      connections = capture.stop();
    }
    assertEquals(0, run.code(), String.join("\n", run.err()));
    return new Wire(connections, Files.readString(tokens.resolve("token-0")).strip());
  }

  @Test
  void withTlsNeitherTheTokenNorACommandsLinesCrossInClear(@TempDir Path tmp) throws Exception {
    Assumptions.assumeTrue(LoopbackCapture.unavailable().isEmpty(), () -> LoopbackCapture.unavailable().get());
    SelfSignedCertificate cert = SelfSignedCertificate.create(tmp.resolve("cert"));
    Wire tls = capture(Files.createDirectories(tmp.resolve("tls")), Map.of(TlsFiles.CERT_ENV,
        cert.certificate().toString(), TlsFiles.KEY_ENV, cert.privateKey().toString()));
    assertTrue(tls.connections().stream().anyMatch(c -> c.protocol().equals("tls")), "the gang's links are TLS");
    for (LoopbackCapture.Connection c : tls.connections()) {
      assertFalse(c.protocol().equals("http2"), "a plaintext gRPC connection: " + c);
      assertFalse(c.carries(tls.token()), "the token in clear on " + c);
      assertFalse(c.carries("a line worker 1 printed") || c.carries("and one on stderr"),
          "a command's line in clear on " + c);
    }

    Wire plain = capture(Files.createDirectories(tmp.resolve("plain")), Map.of());
    assertTrue(plain.connections().stream().anyMatch(c -> c.protocol().equals("http2") && c.carries(plain.token())
        && c.carries("a line worker 1 printed")), "without TLS the capture sees the token and the lines");
  }
}
