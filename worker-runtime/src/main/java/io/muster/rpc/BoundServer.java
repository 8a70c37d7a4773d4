package io.muster.rpc;

import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;

/**
 * A task's gRPC server, bound before its address was published: what a launcher hands a strategy
 * ({@code StrategyBuilder.server}) so that the address the gang was told is the one served. The
 * launcher that bound it keeps it and closes it. Muster's launchers bind one per task; a strategy
 * takes no other implementation.
 */
public interface BoundServer extends AutoCloseable {
  /** The task it serves. */
  TaskId task();

  /** The address peers reach it at, with the bound port. */
  HostPort address();

  /** Stops accepting calls and lets calls in flight finish for a few seconds. */
  @Override
  void close();

  /** Stops at once, cancelling the calls in flight (after a failure, when a peer may be gone without a word). */
  void closeNow();
}
