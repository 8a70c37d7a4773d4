package io.muster.checkpoint;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * Threads for a save's small files (index, state), written while the caller writes the data file.
 * On HDFS every file's close waits for the namenode to complete it, which polls (see
 * {@link CheckpointClient}) when the datanode's block report is late; files written one after
 * another pay that wait one after another, files written at once pay it once.
 */
final class IoThreads {
  private IoThreads() {}

  @FunctionalInterface
  interface Io<T> {
    T run() throws IOException;
  }

  private static final ExecutorService POOL = Executors.newCachedThreadPool(r -> {
    Thread t = new Thread(r, "muster-checkpoint-io");
    t.setDaemon(true);
    return t;
  });

  static <T> Future<T> start(Io<T> io) {
    return POOL.submit(io::run);
  }

  /** The write's result, or its exception as thrown. */
  static <T> T await(Future<T> write) throws IOException {
    try {
      return write.get();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new InterruptedIOException("interrupted while waiting for a checkpoint file to be written");
    } catch (ExecutionException e) {
      Throwable cause = e.getCause();
      if (cause instanceof IOException io) {
        throw io;
      }
      if (cause instanceof RuntimeException re) {
        throw re;
      }
      throw (Error) cause;
    }
  }

  /** Waits for the write to end, for cleaning up after another failure; null when it failed too. */
  static <T> T awaitQuietly(Future<T> write) {
    try {
      return await(write);
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }
}
