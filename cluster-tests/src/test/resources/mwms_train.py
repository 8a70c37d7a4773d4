"""TensorFlow's MultiWorkerMirroredStrategy as Muster launches it on YARN: a custom training loop on
synthetic data; each worker prints a digest of its final weights; the chief keeps the checkpoint in
MUSTER_OUTPUT_DIR and the other workers write theirs to a temporary directory they delete
(TensorFlow's rule)."""
import hashlib
import json
import os

import numpy as np
import tensorflow as tf

strategy = tf.distribute.MultiWorkerMirroredStrategy()
GLOBAL_BATCH = 64
rng = np.random.default_rng(7)
x = rng.normal(size=(1024, 8)).astype("float32")
y = (x @ np.arange(1, 9, dtype="float32")[:, None] > 0).astype("float32")
dataset = strategy.experimental_distribute_dataset(
    tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(GLOBAL_BATCH))

with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(1)])
    optimizer = tf.keras.optimizers.SGD(0.1)


@tf.function
def train_step(iterator):
    def step(inputs):
        features, labels = inputs
        with tf.GradientTape() as tape:
            logits = model(features, training=True)
            per_example = tf.keras.losses.binary_crossentropy(labels, logits, from_logits=True)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL_BATCH)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    return strategy.reduce("SUM", strategy.run(step, args=(next(iterator),)), axis=None)


iterator = iter(dataset)
for _ in range(20):
    loss = train_step(iterator)
digest = hashlib.sha256(b"".join(v.numpy().tobytes() for v in model.trainable_variables)).hexdigest()
print("weights-sha256", digest, "loss", float(loss), flush=True)

task = json.loads(os.environ["TF_CONFIG"])["task"]
chief = os.environ["MUSTER_IS_CHIEF"] == "true"
out = os.environ["MUSTER_OUTPUT_DIR"]
directory = out if chief else os.path.join(out, "workertemp_%d" % task["index"])
tf.train.CheckpointManager(tf.train.Checkpoint(model=model), directory, max_to_keep=1).save()
if not chief:
    tf.io.gfile.rmtree(directory)
