package io.muster.spark;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Which CUDA devices a task owns. Spark assigns GPU addresses per task; when the executor's
 * environment already sets {@code CUDA_VISIBLE_DEVICES} (YARN or Kubernetes isolation,
 * {@code spark.executorEnv}), the addresses are indices into that list (spark-tensorflow-distributor's
 * rule), otherwise they are device ordinals themselves.
 */
final class Gpus {
  private Gpus() {}

  /** The devices to make visible, in Spark's order. */
  static List<String> visibleDevices(List<String> sparkAddresses, String cudaVisibleDevices) {
    if (cudaVisibleDevices == null || cudaVisibleDevices.isBlank()) {
      return List.copyOf(sparkAddresses);
    }
    List<String> visible = Arrays.stream(cudaVisibleDevices.split(",")).map(String::trim).toList();
    List<String> owned = new ArrayList<>();
    for (String address : sparkAddresses) {
      int index;
      try {
        index = Integer.parseInt(address.trim());
      } catch (NumberFormatException e) {
        throw new IllegalStateException("Spark assigned GPU address '" + address + "', which is not an index into "
            + "CUDA_VISIBLE_DEVICES=" + cudaVisibleDevices);
      }
      if (index < 0 || index >= visible.size()) {
        throw new IllegalStateException("Spark assigned GPU " + index + ", but CUDA_VISIBLE_DEVICES="
            + cudaVisibleDevices + " lists only " + visible.size() + " device(s); check the GPU discovery script");
      }
      owned.add(visible.get(index));
    }
    return List.copyOf(owned);
  }
}
