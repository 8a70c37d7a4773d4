package io.muster.spark;

import io.muster.cluster.TaskId;
import java.util.List;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.resource.ResourceInformation;

/** What the in-JVM and the external-command tasks both read from their barrier task context. */
final class BarrierTasks {
  private BarrierTasks() {}

  /** The address Spark knows this executor by (BarrierTaskInfo.address is "host" or "host:port"). */
  static String executorHost(BarrierTaskContext ctx) {
    String address = ctx.getTaskInfos()[ctx.partitionId()].address();
    int colon = address.lastIndexOf(':');
    return colon > 0 && !address.startsWith("[") && address.indexOf(':') == colon ? address.substring(0, colon) : address;
  }

  /** The CUDA devices Spark assigned this task, remapped through CUDA_VISIBLE_DEVICES; empty for none. */
  static List<String> assignedGpus(BarrierTaskContext ctx, TaskId task, int gpusPerWorker) {
    if (gpusPerWorker == 0) {
      return List.of();
    }
    ResourceInformation gpu = ctx.resourcesJMap().get("gpu");
    if (gpu == null || gpu.addresses().length < gpusPerWorker) {
      throw new IllegalStateException(task + " asked for " + gpusPerWorker
          + " GPU(s) but Spark assigned " + (gpu == null ? "none" : gpu.addresses().length)
          + "; check spark.task.resource.gpu.amount and the executors' GPU discovery script");
    }
    return Gpus.visibleDevices(List.of(gpu.addresses()), System.getenv("CUDA_VISIBLE_DEVICES"));
  }
}
