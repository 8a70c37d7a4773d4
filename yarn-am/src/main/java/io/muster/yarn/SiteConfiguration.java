package io.muster.yarn;

import io.muster.internal.Json;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.conf.YarnConfiguration;

/**
 * The client's Hadoop settings that differ from the defaults (the ResourceManager's addresses,
 * {@code fs.defaultFS}, …), carried to the ApplicationMaster in its environment, so the master
 * finds the cluster it was submitted to even where the nodes' {@code HADOOP_CONF_DIR} says
 * otherwise (an in-process cluster, a client-side {@code -D}).
 */
final class SiteConfiguration {
  static final String ENV = "MUSTER_HADOOP_SITE";

  private SiteConfiguration() {}

  static String encode(Configuration conf) {
    Configuration defaults = new YarnConfiguration();
    Map<String, String> site = new TreeMap<>();
    for (Map.Entry<String, String> entry : conf) {
      String value = conf.get(entry.getKey());
      if (!Objects.equals(defaults.get(entry.getKey()), value)) {
        site.put(entry.getKey(), value);
      }
    }
    return Base64.getEncoder().encodeToString(Json.write(site).getBytes(StandardCharsets.UTF_8));
  }

  /** A YARN configuration with the client's settings over the node's. */
  @SuppressWarnings("unchecked")
  static Configuration decode(String encoded) {
    YarnConfiguration conf = new YarnConfiguration();
    if (encoded != null && !encoded.isBlank()) {
      Map<String, Object> site = (Map<String, Object>) Json.parse(
          new String(Base64.getDecoder().decode(encoded), StandardCharsets.UTF_8));
      site.forEach((key, value) -> conf.set(key, String.valueOf(value)));
    }
    return conf;
  }
}
