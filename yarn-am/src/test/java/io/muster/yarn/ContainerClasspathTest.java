package io.muster.yarn;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.muster.yarn.local.LocalYarn;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.yarn.client.api.YarnClient;
import org.apache.hadoop.yarn.server.MiniYARNCluster;
import org.junit.jupiter.api.Test;

class ContainerClasspathTest {

  @Test
  void theContainersGetTheClientsClassPathWithoutTheLocalClustersJars() throws Exception {
    String localYarn = entryOf(LocalYarn.class); // a class directory in the reactor, a jar where installed
    String miniCluster = entryOf(MiniYARNCluster.class);
    String yarnClient = entryOf(YarnClient.class);
    String yarnAm = entryOf(ContainerClasspath.class);
    List<String> classpath = new ArrayList<>(List.of(yarnAm, localYarn, yarnClient, miniCluster, "", "/no/such.jar"));

    assertEquals(List.of(yarnAm, yarnClient, "", "/no/such.jar"), ContainerClasspath.of(classpath));
  }

  private static String entryOf(Class<?> type) throws Exception {
    return Path.of(type.getProtectionDomain().getCodeSource().getLocation().toURI()).toString();
  }
}
