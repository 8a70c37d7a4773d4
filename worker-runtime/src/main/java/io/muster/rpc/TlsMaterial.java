package io.muster.rpc;

import java.io.IOException;
import java.io.Serializable;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;

/**
 * The contents of a job's {@link TlsFiles}, for a launcher to hand its tasks on other hosts, where
 * the files are not: the certificate chain, the private key and the trusted certificates, as PEM.
 * A task writes them into a directory of its own that only its user can read ({@link #writeTo}).
 * They travel as the job token does (Spark's task closure, YARN's container credentials): protect
 * that channel as you protect the token.
 */
public record TlsMaterial(byte[] certificateChain, byte[] privateKey, byte[] trustedCertificates)
    implements Serializable {

  /** The contents of {@code files}. */
  public static TlsMaterial read(TlsFiles files) throws IOException {
    return new TlsMaterial(Files.readAllBytes(files.certificateChain()), Files.readAllBytes(files.privateKey()),
        Files.readAllBytes(files.trustedCertificates()));
  }

  /** Writes the material into {@code dir} (created, {@code rwx------}), each file {@code rw-------}; the files. */
  public TlsFiles writeTo(Path dir) throws IOException {
    Files.createDirectories(dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
    return new TlsFiles(write(dir.resolve("cert.pem"), certificateChain), write(dir.resolve("key.pem"), privateKey),
        write(dir.resolve("ca.pem"), trustedCertificates));
  }

  private static Path write(Path file, byte[] contents) throws IOException {
    Files.deleteIfExists(file);
    Files.createFile(file, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
    return Files.write(file, contents);
  }
}
