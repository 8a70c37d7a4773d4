package io.muster.rpc;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Optional;

/**
 * PEM files that switch a job's gRPC traffic to TLS: the certificate chain and PKCS#8 private key
 * each task serves with, and the certificates a task trusts when it calls a peer (by default the
 * same chain, which suits one self-signed certificate shared by the job).
 */
public record TlsFiles(Path certificateChain, Path privateKey, Path trustedCertificates) {

  public static final String CERT_ENV = "MUSTER_TLS_CERT";
  public static final String KEY_ENV = "MUSTER_TLS_KEY";
  public static final String CA_ENV = "MUSTER_TLS_CA";

  public TlsFiles {
    for (var entry : Map.of("certificate chain", certificateChain, "private key", privateKey,
        "trusted certificates", trustedCertificates).entrySet()) {
      if (entry.getValue() == null) {
        throw new IllegalArgumentException("TLS " + entry.getKey() + " file must be given");
      }
      if (!Files.isReadable(entry.getValue())) {
        throw new IllegalArgumentException("TLS " + entry.getKey() + " file " + entry.getValue() + " is not readable");
      }
    }
  }

  /** TLS from {@code MUSTER_TLS_CERT}, {@code MUSTER_TLS_KEY} and optionally {@code MUSTER_TLS_CA}; empty when neither is set. */
  public static Optional<TlsFiles> fromEnvironment(Map<String, String> environment) {
    String cert = environment.get(CERT_ENV);
    String key = environment.get(KEY_ENV);
    if (cert == null && key == null) {
      return Optional.empty();
    }
    if (cert == null || key == null) {
      throw new IllegalArgumentException("TLS needs both " + CERT_ENV + " and " + KEY_ENV + "; only "
          + (cert == null ? KEY_ENV : CERT_ENV) + " is set");
    }
    String ca = environment.getOrDefault(CA_ENV, cert);
    return Optional.of(new TlsFiles(Path.of(cert), Path.of(key), Path.of(ca)));
  }
}
