package io.muster.rpc;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.Map;

/**
 * The job's shared secret. Every call between the tasks of a job carries it in the
 * {@code muster-job-token} header, and every task refuses a call whose token does not match.
 * Comparison takes the same time whatever the presented value (SHA-256 digests compared with
 * {@link MessageDigest#isEqual}), so the token cannot be guessed byte by byte.
 */
public final class JobToken {

  public static final String ENV = "MUSTER_JOB_TOKEN";

  private final String value;
  private final byte[] digest;

  private JobToken(String value) {
    this.value = value;
    this.digest = sha256(value);
  }

  /**
   * @throws IllegalArgumentException if the token is empty or not printable ASCII (it travels
   *     in a gRPC header)
   */
  public static JobToken of(String value) {
    if (value == null || value.isEmpty()) {
      throw new IllegalArgumentException("job token must be non-empty");
    }
    if (!value.chars().allMatch(c -> c >= 0x21 && c <= 0x7e)) {
      throw new IllegalArgumentException("job token must be printable ASCII without spaces");
    }
    return new JobToken(value);
  }

  /** A fresh secret: 128 random bits from {@link SecureRandom}, as 32 hex digits. */
  public static JobToken random() {
    byte[] secret = new byte[16];
    new SecureRandom().nextBytes(secret);
    return new JobToken(HexFormat.of().formatHex(secret));
  }

  /** The token from {@code MUSTER_JOB_TOKEN}; an unset variable is an error that says what to do. */
  public static JobToken fromEnvironment(Map<String, String> environment) {
    String value = environment.get(ENV);
    if (value == null || value.isEmpty()) {
      throw new IllegalArgumentException(ENV + " is not set: every task of a job must carry the same secret "
          + "token; set " + ENV + " to one value on every task (for example the output of `openssl rand -hex 16`)");
    }
    return of(value);
  }

  /** The secret itself, for a transport that carries it (the collective data plane's handshake). */
  public String value() {
    return value;
  }

  /** Constant-time comparison with a presented token; {@code null} never matches. */
  public boolean matches(String presented) {
    return presented != null && MessageDigest.isEqual(digest, sha256(presented));
  }

  private static byte[] sha256(String s) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is required by every Java platform", e);
    }
  }

  @Override
  public String toString() {
    return "JobToken[****]";
  }
}
