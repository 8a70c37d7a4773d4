package io.muster.internal.rpc;

import io.muster.rpc.TlsFiles;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.Base64;
import java.util.List;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

/**
 * The JDK's TLS from a job's {@link TlsFiles}, for the streams that are not gRPC (the collectives'
 * data plane): the same PEM files the task server serves with and its peers trust.
 */
public final class TlsContexts {
  private static final String PKCS8_BEGIN = "-----BEGIN PRIVATE KEY-----";
  private static final String PKCS8_END = "-----END PRIVATE KEY-----";

  private TlsContexts() {}

  /**
   * A context that serves with the files' certificate chain and key and trusts the files' trusted
   * certificates.
   *
   * @throws UncheckedIOException naming the file that cannot be read
   * @throws IllegalArgumentException naming the file that holds no usable certificate or key
   */
  public static SSLContext of(TlsFiles files) {
    Certificate[] chain = certificates(files.certificateChain()).toArray(new Certificate[0]);
    List<? extends Certificate> trusted = certificates(files.trustedCertificates());
    PrivateKey key = privateKey(files.privateKey());
    try {
      // Both stores live only in memory; the password protects nothing and is never written.
      char[] password = "muster".toCharArray();
      KeyStore keys = KeyStore.getInstance("PKCS12");
      keys.load(null, null);
      keys.setKeyEntry("muster", key, password, chain);
      KeyManagerFactory keyManagers = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
      keyManagers.init(keys, password);
      KeyStore trust = KeyStore.getInstance("PKCS12");
      trust.load(null, null);
      for (int i = 0; i < trusted.size(); i++) {
        trust.setCertificateEntry("trusted-" + i, trusted.get(i));
      }
      TrustManagerFactory trustManagers = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
      trustManagers.init(trust);
      SSLContext context = SSLContext.getInstance("TLS");
      context.init(keyManagers.getKeyManagers(), trustManagers.getTrustManagers(), null);
      return context;
    } catch (GeneralSecurityException | IOException e) {
      throw new IllegalArgumentException("cannot make a TLS context from certificate " + files.certificateChain()
          + " and key " + files.privateKey() + ": " + e.getMessage(), e);
    }
  }

  private static List<? extends Certificate> certificates(Path file) {
    try (InputStream in = Files.newInputStream(file)) {
      List<? extends Certificate> certificates = List.copyOf(CertificateFactory.getInstance("X.509").generateCertificates(in));
      if (certificates.isEmpty()) {
        throw new IllegalArgumentException("TLS certificate file " + file + " holds no certificate");
      }
      return certificates;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read TLS certificate file " + file + ": " + e.getMessage(), e);
    } catch (GeneralSecurityException e) {
      throw new IllegalArgumentException("TLS certificate file " + file + " holds no PEM certificate: " + e.getMessage(), e);
    }
  }

  /** A PKCS#8 PEM key ({@code BEGIN PRIVATE KEY}), as gRPC's TLS takes it; RSA, EC or EdDSA. */
  private static PrivateKey privateKey(Path file) {
    String pem;
    try {
      pem = Files.readString(file);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read TLS private key file " + file + ": " + e.getMessage(), e);
    }
    int begin = pem.indexOf(PKCS8_BEGIN);
    int end = pem.indexOf(PKCS8_END);
    if (begin < 0 || end < begin) {
      throw new IllegalArgumentException("TLS private key file " + file + " is not a PKCS#8 PEM key (" + PKCS8_BEGIN
          + "); convert it with: openssl pkcs8 -topk8 -nocrypt -in KEY -out KEY.pk8");
    }
    byte[] der = Base64.getMimeDecoder().decode(pem.substring(begin + PKCS8_BEGIN.length(), end));
    for (String algorithm : List.of("RSA", "EC", "EdDSA")) {
      try {
        return KeyFactory.getInstance(algorithm).generatePrivate(new PKCS8EncodedKeySpec(der));
      } catch (GeneralSecurityException e) {
        // not this algorithm; try the next
      }
    }
    throw new IllegalArgumentException("TLS private key file " + file + " holds no RSA, EC or EdDSA key");
  }
}
