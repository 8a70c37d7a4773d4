package io.muster.spark;

import io.muster.cluster.TaskId;
import io.muster.strategy.MultiWorkerMirroredStrategy;
import java.util.Iterator;

/**
 * One barrier task's view of the job.
 *
 * @param strategy joined to every other task; collectives, barrier, chief rules
 * @param rows this task's partition (one shard of the repartitioned data), to be read once
 * @param task {@code worker <partition id>}
 * @param attempt the stage attempt, 0 for the first run and higher when the gang is re-run
 */
public record TrainContext<T>(MultiWorkerMirroredStrategy strategy, Iterator<T> rows, TaskId task, int attempt) {}
