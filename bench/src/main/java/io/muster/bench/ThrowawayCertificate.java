package io.muster.bench;

import io.muster.rpc.TlsFiles;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A self-signed certificate for 127.0.0.1 and its PKCS#8 key as PEM files in a temporary
 * directory, made with the JDK's keytool (no crypto library), for benchmarks with TLS on; the
 * directory is deleted on close.
 */
final class ThrowawayCertificate implements AutoCloseable {
  private final Path dir;
  private final Path certificate;
  private final Path privateKey;

  private ThrowawayCertificate(Path dir, Path certificate, Path privateKey) {
    this.dir = dir;
    this.certificate = certificate;
    this.privateKey = privateKey;
  }

  static ThrowawayCertificate create() throws Exception {
    Path dir = Files.createTempDirectory("muster-bench-tls");
    Path store = dir.resolve("keystore.p12");
    char[] password = "changeit".toCharArray();
    Process keytool = new ProcessBuilder(List.of(
        Path.of(System.getProperty("java.home"), "bin", "keytool").toString(),
        "-genkeypair", "-alias", "muster", "-keyalg", "RSA", "-keysize", "2048", "-validity", "2",
        "-dname", "CN=localhost", "-ext", "SAN=ip:127.0.0.1,dns:localhost",
        "-keystore", store.toString(), "-storetype", "PKCS12",
        "-storepass", new String(password), "-keypass", new String(password)))
        .redirectErrorStream(true).start();
    String out = new String(keytool.getInputStream().readAllBytes());
    if (!keytool.waitFor(60, TimeUnit.SECONDS) || keytool.exitValue() != 0) {
      throw new IOException("keytool failed: " + out);
    }
    KeyStore keys = KeyStore.getInstance("PKCS12");
    try (InputStream in = Files.newInputStream(store)) {
      keys.load(in, password);
    }
    Path cert = dir.resolve("cert.pem");
    Path key = dir.resolve("key.pem");
    Files.writeString(cert, pem("CERTIFICATE", keys.getCertificate("muster").getEncoded()));
    Files.writeString(key, pem("PRIVATE KEY", keys.getKey("muster", password).getEncoded()));
    Files.delete(store);
    return new ThrowawayCertificate(dir, cert, key);
  }

  /** {@code MUSTER_TLS_CERT} and {@code MUSTER_TLS_KEY} for a child (it trusts the same certificate). */
  Map<String, String> environment() {
    return Map.of(TlsFiles.CERT_ENV, certificate.toString(), TlsFiles.KEY_ENV, privateKey.toString());
  }

  private static String pem(String type, byte[] der) {
    return "-----BEGIN " + type + "-----\n" + Base64.getMimeEncoder(64, "\n".getBytes()).encodeToString(der)
        + "\n-----END " + type + "-----\n";
  }

  @Override
  public void close() throws IOException {
    Files.deleteIfExists(certificate);
    Files.deleteIfExists(privateKey);
    Files.deleteIfExists(dir);
  }
}
