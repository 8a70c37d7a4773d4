package io.muster.yarn;

import io.muster.rpc.JobToken;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.security.Credentials;

/**
 * How a job reaches its containers: its description as JSON in the launch environment, its token in
 * the container's credentials (never on a command line or in the environment, where {@code ps} and
 * the NodeManager's logs would show it). The client hands both to the master; the master hands them
 * on to every executor.
 */
final class Handoff {

  /** The job's description, as JSON, in the master's and the executors' environment. */
  static final String JOB_ENV = "MUSTER_YARN_JOB";
  private static final Text TOKEN_KEY = new Text("muster.job.token");

  private Handoff() {
  }

  /** The job this container runs for, from its environment. */
  static YarnJob job() {
    return YarnJob.fromEnvironmentValue(System.getenv(JOB_ENV));
  }

  static void putToken(Credentials credentials, String token) {
    credentials.addSecretKey(TOKEN_KEY, token.getBytes(StandardCharsets.US_ASCII));
  }

  /** The job's token from a container's credentials; empty where it was not submitted by {@code muster submit}. */
  static Optional<JobToken> token(Credentials credentials) {
    byte[] secret = credentials.getSecretKey(TOKEN_KEY);
    return secret == null ? Optional.empty() : Optional.of(JobToken.of(new String(secret, StandardCharsets.US_ASCII)));
  }
}
