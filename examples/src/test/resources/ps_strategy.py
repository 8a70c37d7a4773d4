"""TensorFlow 2's ParameterServerStrategy as Muster launches it: the chief schedules closures that
add to a variable on the ps; the workers and the ps serve until Muster ends them."""
import json
import os

os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")
import tensorflow as tf  # noqa: E402

config = json.loads(os.environ["TF_CONFIG"])
task_type, task_index = config["task"]["type"], config["task"]["index"]
resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
print("started", task_type, task_index, "pid", os.getpid(), flush=True)
if task_type in ("worker", "ps"):
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=task_type, task_index=task_index,
                                  protocol="grpc", start=True)
    server.join()  # never returns
else:
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        total = tf.Variable(0.0)

    @tf.function
    def add_one():
        total.assign_add(1.0)
        return total.read_value()

    for _ in range(50):
        coordinator.schedule(add_one)
    coordinator.join()
    result = "total=%g" % total.numpy()
    print(result, flush=True)  # in the container's log on YARN
    with open(os.environ["MUSTER_RESULT_FILE"], "w") as f:  # Spark returns it to the driver
        f.write(result)
