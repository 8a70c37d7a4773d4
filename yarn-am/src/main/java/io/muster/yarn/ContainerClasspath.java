package io.muster.yarn;

import java.io.IOException;
import java.net.JarURLConnection;
import java.net.URISyntaxException;
import java.net.URL;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * The class path the master and the executors get: the client's, without the jars only the client's
 * own local cluster needs (Muster's {@code LocalYarn}, Hadoop's mini cluster and the JUnit and
 * Hamcrest that one brings). The containers never load them, and where the runtime is staged they
 * were a third of what a node fetched for a job (41 of 129 MB).
 */
final class ContainerClasspath {

  /** A class of each jar the containers do without, found where this JVM loads it from. */
  private static final List<String> LOCAL_CLUSTER_ONLY = List.of("io/muster/yarn/local/LocalYarn.class",
      "org/apache/hadoop/yarn/server/MiniYARNCluster.class", "org/junit/Test.class", "org/hamcrest/Matcher.class");

  private ContainerClasspath() {}

  static List<String> of(List<String> classpath) {
    Set<Path> localClusterOnly = new HashSet<>();
    for (String resource : LOCAL_CLUSTER_ONLY) {
      entryHolding(resource).ifPresent(localClusterOnly::add);
    }
    return classpath.stream()
        .filter(entry -> entry.isBlank() || !localClusterOnly.contains(Path.of(entry).toAbsolutePath().normalize()))
        .toList();
  }

  /** The class-path entry (a jar or a class directory) this JVM loads {@code resource} from, if any. */
  private static Optional<Path> entryHolding(String resource) {
    URL url = ContainerClasspath.class.getClassLoader().getResource(resource);
    try {
      if (url != null && url.getProtocol().equals("jar")) {
        return Optional.of(Path.of(((JarURLConnection) url.openConnection()).getJarFileURL().toURI()).normalize());
      }
      if (url != null && url.getProtocol().equals("file")) {
        Path directory = Path.of(url.toURI());
        for (int depth = resource.split("/").length; depth > 0; depth--) {
          directory = directory.getParent();
        }
        return Optional.of(directory.normalize());
      }
    } catch (IOException | URISyntaxException | IllegalArgumentException e) {
      // not a file of this machine's: nothing to leave out
    }
    return Optional.empty();
  }
}
