/**
 * A task's identity in its job: TensorFlow's {@code TF_CONFIG}, the cluster spec, task ids and roles (chief,
 * worker, ps, evaluator). Pure values: no network.
 */
package io.muster.cluster;
