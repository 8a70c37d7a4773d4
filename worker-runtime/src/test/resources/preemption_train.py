"""TensorFlow's MultiWorkerMirroredStrategy with its own PreemptionCheckpointHandler, as Muster
launches it on YARN: a custom training loop of 4 epochs of 20 steps on synthetic data, each step
run through the handler. On SIGTERM (Muster's preemption notice) the handler agrees on a step with
the other workers, saves there (the chief in MUSTER_OUTPUT_DIR, the others in workertemp_<id>) and
exits with 42; started again, it restores and the loop goes on at the saved step. Prints
"attempt A starts at step S", "step N done" after each step, and the final weights' digest.
Argument: the seconds each step takes at least."""
import hashlib
import os
import sys
import time

import numpy as np
import tensorflow as tf

EPOCHS, STEPS, GLOBAL_BATCH = 4, 20, 64
step_seconds = float(sys.argv[1])
strategy = tf.distribute.MultiWorkerMirroredStrategy()
tf.keras.utils.set_random_seed(7)  # the same initial weights in every run, to compare their ends
rng = np.random.default_rng(7)
x = rng.normal(size=(EPOCHS * STEPS * GLOBAL_BATCH, 8)).astype("float32")
y = (x @ np.arange(1, 9, dtype="float32")[:, None] > 0).astype("float32")

with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(1)])
    optimizer = tf.keras.optimizers.SGD(0.1)
checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
handler = tf.distribute.experimental.PreemptionCheckpointHandler(
    strategy.cluster_resolver, checkpoint, os.environ["MUSTER_OUTPUT_DIR"])
done = handler.total_run_calls  # restored: the steps a preempted run saved after
print("attempt %s starts at step %d" % (os.environ["MUSTER_ATTEMPT"], done), flush=True)



def this_workers_batches(context):
    # Step n's global batch is rows [64n, 64n + 64) whichever run trains it, and each worker takes its
    # half: the data goes on exactly where the save was (no auto-sharding to second-guess).
    local = context.get_per_replica_batch_size(GLOBAL_BATCH)
    first = context.input_pipeline_id * local
    return (tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH).skip(done)
            .map(lambda features, labels: (features[first:first + local], labels[first:first + local])))


dataset = strategy.distribute_datasets_from_function(this_workers_batches)


@tf.function
def train_step(inputs):
    def step(batch):
        features, labels = batch
        with tf.GradientTape() as tape:
            logits = model(features, training=True)
            per_example = tf.keras.losses.binary_crossentropy(labels, logits, from_logits=True)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL_BATCH)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    return strategy.reduce("SUM", strategy.run(step, args=(inputs,)), axis=None)


iterator = iter(dataset)
while handler.total_run_calls < EPOCHS * STEPS:
    handler.run(train_step, next(iterator))
    time.sleep(step_seconds)
    print("step %d done" % handler.total_run_calls, flush=True)
digest = hashlib.sha256(b"".join(v.numpy().tobytes() for v in model.trainable_variables)).hexdigest()
print("weights-sha256", digest, flush=True)
