package io.muster.rpc;

import java.util.Optional;

/** How a job's tasks authenticate each other: the shared token, and TLS when configured. */
public record Security(JobToken token, Optional<TlsFiles> tls) {

  public Security {
    if (token == null) {
      throw new IllegalArgumentException("a job token is required: every call between tasks carries it");
    }
    if (tls == null) {
      throw new IllegalArgumentException("tls must be Optional.empty() when not used, not null");
    }
  }

  public static Security of(JobToken token) {
    return new Security(token, Optional.empty());
  }

  /** The token and TLS settings from {@code MUSTER_JOB_TOKEN} and {@code MUSTER_TLS_*}. */
  public static Security fromEnvironment(java.util.Map<String, String> environment) {
    return new Security(JobToken.fromEnvironment(environment), TlsFiles.fromEnvironment(environment));
  }
}
