package io.muster.cluster;

/**
 * A cluster description that TensorFlow would reject or that cannot work: a malformed
 * {@code TF_CONFIG}, a task that is not in the cluster, an address without a port. The
 * message names the field and the value involved.
 */
public class ClusterConfigException extends IllegalArgumentException {
  public ClusterConfigException(String message) {
    super(message);
  }
}
