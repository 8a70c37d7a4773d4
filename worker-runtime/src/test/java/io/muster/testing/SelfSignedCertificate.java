package io.muster.testing;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A self-signed certificate for 127.0.0.1 and its PKCS#8 key as PEM files, made with the JDK's
 * keytool (a real child process) so that no test depends on a crypto library.
 */
public record SelfSignedCertificate(Path certificate, Path privateKey) {

  public static SelfSignedCertificate create(Path dir) throws Exception {
    Files.createDirectories(dir);
    Path store = dir.resolve("keystore.p12");
    Files.deleteIfExists(store);
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
    return new SelfSignedCertificate(cert, key);
  }

  private static String pem(String type, byte[] der) {
    return "-----BEGIN " + type + "-----\n" + Base64.getMimeEncoder(64, "\n".getBytes()).encodeToString(der)
        + "\n-----END " + type + "-----\n";
  }
}
