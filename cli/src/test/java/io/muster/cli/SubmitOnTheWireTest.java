package io.muster.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.rpc.TlsFiles;
import io.muster.testing.ChildJvm;
import io.muster.testing.LoopbackCapture;
import io.muster.testing.SelfSignedCertificate;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What {@code muster submit --local} sends across loopback between the job's master and its
 * executors, captured off the wire: with {@code MUSTER_TLS_*} set where it runs, every gRPC
 * connection is TLS and the job token crosses none in clear; without TLS a plaintext gRPC
 * connection carries it, which shows that the capture sees the job's traffic at all. (Hadoop's own
 * RPC carries the job's credentials as YARN's launch contexts do; its protection is the cluster's
 * {@code hadoop.rpc.protection}, and those connections are left out here.)
 */
class SubmitOnTheWireTest {

  private record Wire(List<LoopbackCapture.Connection> connections, String token) {}

  private static Wire capture(Path dir, Map<String, String> env) throws Exception {
    List<String> command = new ArrayList<>(ChildJvm.command("1g", Muster.class, List.of("submit", "--local",
        "--worker-instances", "2", "--worker-memory", "256m", "--gang-timeout", "2m",
        "--command", "echo \"$MUSTER_JOB_TOKEN\" > " + dir + "/token-$MUSTER_TASK_INDEX")));
    java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments().stream()
        .filter(a -> a.startsWith("--add-opens") || a.startsWith("--add-exports")).forEach(a -> command.add(1, a));
    ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true)
        .redirectOutput(dir.resolve("submit.log").toFile());
    builder.environment().putAll(env);
    List<LoopbackCapture.Connection> connections;
    try (LoopbackCapture capture = LoopbackCapture.start(dir, Duration.ofMinutes(5))) {
      Process submit = builder.start();
      try {
        assertTrue(submit.waitFor(4, TimeUnit.MINUTES), "muster submit ended");
        assertEquals(0, submit.exitValue(), Files.readString(dir.resolve("submit.log")));
      } finally {
        submit.destroyForcibly().waitFor();
      }
      connections = capture.stop();
    }
    return new Wire(connections, Files.readString(dir.resolve("token-0")).strip());
  }

  @Test
  void withTlsTheGangServiceIsTlsAndTheTokenCrossesNoMusterConnectionInClear(@TempDir Path tmp) throws Exception {
    Assumptions.assumeTrue(LoopbackCapture.unavailable().isEmpty(), () -> LoopbackCapture.unavailable().get());
    SelfSignedCertificate cert = SelfSignedCertificate.create(tmp.resolve("cert"));
    Wire tls = capture(Files.createDirectories(tmp.resolve("tls")), Map.of(TlsFiles.CERT_ENV,
        cert.certificate().toString(), TlsFiles.KEY_ENV, cert.privateKey().toString()));
    assertTrue(tls.connections().stream().anyMatch(c -> c.protocol().equals("tls")), "the gang's links are TLS");
    for (LoopbackCapture.Connection c : tls.connections()) {
      assertFalse(c.protocol().equals("http2"), "a plaintext gRPC connection: " + c);
      assertFalse(!c.protocol().equals("hadoop-ipc") && c.carries(tls.token()), "the token in clear on " + c);
    }

    Wire plain = capture(Files.createDirectories(tmp.resolve("plain")), Map.of());
    assertTrue(plain.connections().stream().anyMatch(c -> c.protocol().equals("http2") && c.carries(plain.token())),
        () -> "without TLS the capture sees the token on the gang's gRPC connections; it saw " + plain.connections());
  }
}
