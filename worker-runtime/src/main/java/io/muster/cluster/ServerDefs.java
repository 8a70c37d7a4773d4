package io.muster.cluster;

import io.muster.proto.tf.ConfigProto;
import io.muster.proto.tf.CoordinatedJob;
import io.muster.proto.tf.CoordinationServiceConfig;
import io.muster.proto.tf.ServerDef;

/**
 * Renders the TensorFlow {@code ServerDef} with which a real TensorFlow server can be started as
 * a given task of a Muster cluster.
 */
public final class ServerDefs {

  private ServerDefs() {}

  /**
   * The {@code ServerDef} that {@code MultiWorkerMirroredStrategy} builds from {@code TF_CONFIG}:
   * the cluster (jobs sorted by name, tasks by index), the task's job and index, the protocol
   * ({@code rpc_layer}, default {@code grpc}) and port 0, so that TensorFlow takes the port from
   * the task's address. For a chief or worker it also carries MWMS's session config: the
   * collective group leader, a device filter for the task itself and a standalone coordination
   * service led by {@link Roles#coordinationLeader} over the chief and worker jobs. Other tasks
   * (ps, evaluator) get the plain server definition that {@code tf.distribute.Server} uses.
   */
  public static ServerDef forTask(TfConfig config) {
    TaskId task = config.requireTask();
    ClusterSpec cluster = config.cluster();
    if (!cluster.contains(task)) {
      throw new ClusterConfigException("Task " + task.index() + " was not defined in job \"" + task.job() + "\"");
    }
    ServerDef.Builder def = ServerDef.newBuilder()
        .setCluster(cluster.toClusterDef())
        .setJobName(task.job())
        .setTaskIndex(task.index())
        .setProtocol(config.rpcLayer().filter(l -> !l.isEmpty()).orElse("grpc"));
    if (task.is(TaskType.CHIEF) || task.is(TaskType.WORKER)) {
      CoordinationServiceConfig.Builder coordination = CoordinationServiceConfig.newBuilder()
          .setServiceType("standalone")
          .setServiceLeader(Roles.coordinationLeader(cluster))
          .setEnableHealthCheck(true);
      for (TaskType type : new TaskType[] {TaskType.CHIEF, TaskType.WORKER}) {
        if (cluster.hasJob(type)) {
          coordination.addCoordinatedJobList(
              CoordinatedJob.newBuilder().setName(type.jobName()).setNumTasks(cluster.numTasks(type)));
        }
      }
      def.setDefaultSessionConfig(ConfigProto.newBuilder()
          .addDeviceFilters("/job:" + task.job() + "/task:" + task.index())
          .setExperimental(ConfigProto.Experimental.newBuilder()
              .setCollectiveGroupLeader(Roles.collectiveLeader(cluster, task.job(), task.index()))
              .setCoordinationConfig(coordination)));
    }
    return def.build();
  }
}
