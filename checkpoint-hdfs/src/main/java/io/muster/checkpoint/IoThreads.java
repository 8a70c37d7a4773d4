package io.muster.checkpoint;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Threads for a save's small files (index, state), written while the caller writes the data file.
 * On HDFS every file's close waits for the namenode to complete it, which polls (see
 * {@link CheckpointClient}) when the datanode's block report is late; files written one after
 * another pay that wait one after another, files written at once pay it once.
 *
 * <p>Owned by whoever makes it (a {@link CheckpointManager}, or one {@link BundleWriter#write} call) and
 * closed by it: {@link #close()} lets running writes finish and returns once every thread has
 * ended. The threads are daemons named {@code muster-checkpoint-io-<n>}; an idle one ends after a
 * minute, so a pool whose owner is never closed holds no thread for long.
 */
final class IoThreads implements AutoCloseable {
  static final String THREAD_PREFIX = "muster-checkpoint-io-";
  private static final long IDLE_SECONDS = 60;
  private static final AtomicInteger THREAD_NUMBER = new AtomicInteger();

  @FunctionalInterface
  interface Io<T> {
    T run() throws IOException;
  }

  private final String owner;
  private final Set<Thread> threads = ConcurrentHashMap.newKeySet();
  private final ThreadPoolExecutor pool;

  /** @param owner named in the error when a write is started after {@link #close()} */
  IoThreads(String owner) {
    this.owner = owner;
    this.pool = new ThreadPoolExecutor(0, Integer.MAX_VALUE, IDLE_SECONDS, TimeUnit.SECONDS,
        new SynchronousQueue<>(), this::newThread);
  }

  private Thread newThread(Runnable r) {
    threads.removeIf(t -> !t.isAlive());
    Thread t = new Thread(r, THREAD_PREFIX + THREAD_NUMBER.incrementAndGet());
    t.setDaemon(true);
    threads.add(t);
    return t;
  }

  <T> Future<T> start(Io<T> io) {
    try {
      return pool.submit(io::run);
    } catch (RejectedExecutionException e) {
      throw new IllegalStateException("the checkpoint I/O threads of " + owner + " are closed", e);
    }
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

  /** Lets the writes already started finish, then ends every thread; idempotent. */
  @Override
  public void close() {
    pool.shutdown();
    try {
      for (Thread t : threads) {
        t.join();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
