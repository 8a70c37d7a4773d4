# What real TensorFlow says, for ParameterServerReferenceTest: reads one JSON request on stdin,
# prints one JSON answer. Partitioners: shard counts; optimizers: a float32 variable's values
# after each gradient step.
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf

request = json.load(sys.stdin)
answer = {"partitions": [], "optimizers": []}

partitioners = tf.distribute.experimental.partitioners
for case in request["partitioners"]:
    kind = case["kind"]
    if kind == "fixed":
        p = partitioners.FixedShardsPartitioner(case["num_shards"])
    elif kind == "min":
        p = partitioners.MinSizePartitioner(min_shard_bytes=case["bytes"], max_shards=case["max_shards"])
    else:
        p = partitioners.MaxSizePartitioner(max_shard_bytes=case["bytes"], max_shards=case.get("max_shards") or None)
    answer["partitions"].append(int(p(tf.TensorShape(case["shape"]), tf.float32)[0]))

for case in request["optimizers"]:
    kind = case["kind"]
    lr = case["learning_rate"]
    if kind == "SGD":
        opt = tf.keras.optimizers.SGD(learning_rate=lr)
    elif kind == "MOMENTUM":
        opt = tf.keras.optimizers.SGD(learning_rate=lr, momentum=case["momentum"], nesterov=case["nesterov"])
    elif kind == "ADAGRAD":
        opt = tf.keras.optimizers.Adagrad(learning_rate=lr)
    else:
        opt = tf.keras.optimizers.Adam(learning_rate=lr)
    v = tf.Variable(np.array(case["initial"], dtype=np.float32))
    steps = []
    for g in case["gradients"]:
        opt.apply_gradients([(tf.constant(np.array(g, dtype=np.float32)), v)])
        steps.append([float(x) for x in v.numpy()])
    answer["optimizers"].append(steps)

print(json.dumps(answer))
