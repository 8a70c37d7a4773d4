package io.muster.yarn;

import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import io.muster.rpc.TlsFiles;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import io.muster.rpc.TlsMaterial;
import java.nio.file.Path;
import java.util.Map;
import java.util.Optional;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.security.Credentials;

/**
 * How a job reaches its containers: its description as JSON in the launch environment, its token
 * and its TLS material (the PEM files {@code MUSTER_TLS_*} name where {@code muster submit} runs) in
 * the container's credentials, never on a command line or in the environment, where {@code ps} and
 * the NodeManager's logs would show them. YARN hands the credentials to each container in a token
 * file of its own; the client hands them to the master, the master on to every executor, and each
 * writes the TLS material to files only its user can read.
 */
final class Handoff {

  /** The job's description, as JSON, in the master's and the executors' environment. */
  static final String JOB_ENV = "MUSTER_YARN_JOB";
  private static final Text TOKEN_KEY = new Text("muster.job.token");
  private static final Text TLS_CERT = new Text("muster.tls.cert");
  private static final Text TLS_KEY = new Text("muster.tls.key");
  private static final Text TLS_CA = new Text("muster.tls.ca");

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

  /** Puts the TLS material into the job's credentials, beside its token. */
  static void putTls(Credentials credentials, TlsFiles tls) throws IOException {
    TlsMaterial material = TlsMaterial.read(tls);
    credentials.addSecretKey(TLS_CERT, material.certificateChain());
    credentials.addSecretKey(TLS_KEY, material.privateKey());
    credentials.addSecretKey(TLS_CA, material.trustedCertificates());
  }

  /**
   * This container's security: the job's token, and TLS when the job has TLS material, which is
   * written into {@code dir} (readable by this user alone) for the task server and channels, and for
   * the command's {@code MUSTER_TLS_*} ({@link #tlsEnvironment}).
   */
  static Security security(JobToken token, Credentials credentials, Path dir) throws IOException {
    byte[] cert = credentials.getSecretKey(TLS_CERT);
    if (cert == null) {
      return Security.of(token);
    }
    TlsMaterial material = new TlsMaterial(cert, credentials.getSecretKey(TLS_KEY), credentials.getSecretKey(TLS_CA));
    return new Security(token, Optional.of(material.writeTo(dir.resolve(".muster-tls"))));
  }

  /** The {@code MUSTER_TLS_*} variables that name {@code security}'s files, for a command; none without TLS. */
  static Map<String, String> tlsEnvironment(Security security) {
    return security.tls().map(tls -> Map.of(TlsFiles.CERT_ENV, tls.certificateChain().toString(), TlsFiles.KEY_ENV,
        tls.privateKey().toString(), TlsFiles.CA_ENV, tls.trustedCertificates().toString())).orElse(Map.of());
  }
}
