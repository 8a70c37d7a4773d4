package io.muster.yarn;

import java.io.IOException;
import java.time.Duration;
import java.util.Arrays;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CommonConfigurationKeysPublic;
import org.apache.hadoop.yarn.api.protocolrecords.AllocateResponse;
import org.apache.hadoop.yarn.client.api.AMRMClient;
import org.apache.hadoop.yarn.client.api.AMRMClient.ContainerRequest;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.exceptions.YarnException;

/**
 * The master's client of the ResourceManager, bounded: unless the cluster sets
 * {@code yarn.resourcemanager.connect.max-wait.ms}, a ResourceManager that does not answer for
 * {@link #LOST} (not YARN's 15 minutes) ends the master ({@link Lost}), one connection attempt per
 * retry (the IPC client's own retries would multiply the wait: 10 on a refusal, 45 on a timeout).
 */
final class ResourceManagerLink {

  /** How long a silent ResourceManager is waited for, where the cluster does not say. */
  static final Duration LOST = Duration.ofSeconds(60);

  /** The ResourceManager did not answer within the client's bound: the cluster is gone, or this node is cut off. */
  static final class Lost extends RuntimeException {
    Lost(String message, Throwable cause) {
      super(message, cause);
    }
  }

  private ResourceManagerLink() {}

  /** The configuration of the master's ResourceManager client, from the cluster's. */
  static Configuration clientConfiguration(Configuration conf) {
    Configuration rm = new Configuration(conf);
    String[] sources = conf.getPropertySources(YarnConfiguration.RESOURCEMANAGER_CONNECT_MAX_WAIT_MS);
    if (sources == null || Arrays.stream(sources).allMatch(source -> source.equals("yarn-default.xml"))) {
      rm.setLong(YarnConfiguration.RESOURCEMANAGER_CONNECT_MAX_WAIT_MS, LOST.toMillis());
      rm.setLong(YarnConfiguration.RESOURCEMANAGER_CONNECT_RETRY_INTERVAL_MS, Math.min(5000, conf.getLong(
          YarnConfiguration.RESOURCEMANAGER_CONNECT_RETRY_INTERVAL_MS,
          YarnConfiguration.DEFAULT_RESOURCEMANAGER_CONNECT_RETRY_INTERVAL_MS)));
    }
    rm.setInt(CommonConfigurationKeysPublic.IPC_CLIENT_CONNECT_MAX_RETRIES_KEY, 0);
    rm.setInt(CommonConfigurationKeysPublic.IPC_CLIENT_CONNECT_MAX_RETRIES_ON_SOCKET_TIMEOUTS_KEY, 0);
    return rm;
  }

  /** The next allocation round; a ResourceManager that stays silent past the client's retries is {@link Lost}. */
  static AllocateResponse allocate(AMRMClient<ContainerRequest> rm) throws YarnException {
    try {
      return rm.allocate(0.5f);
    } catch (IOException e) {
      throw new Lost("lost the ResourceManager: no answer within "
          + Duration.ofMillis(rm.getConfig().getLong(YarnConfiguration.RESOURCEMANAGER_CONNECT_MAX_WAIT_MS, 0)).toSeconds()
          + " s (" + e.getMessage() + ")", e);
    }
  }
}
