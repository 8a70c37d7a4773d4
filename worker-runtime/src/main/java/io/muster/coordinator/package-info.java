/**
 * TensorFlow's {@code ClusterCoordinator} for parameter-server training: schedule functions on workers, get their
 * values back, with retries when a worker is lost.
 */
package io.muster.coordinator;
