package io.muster.testing;

import io.muster.collective.Collectives;
import io.muster.collective.CollectiveGroup;
import io.muster.collective.CommunicationOptions;
import io.muster.coordination.CoordinationOptions;
import io.muster.internal.coordination.TaskRuntime;
import io.muster.rpc.Security;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.BiFunction;

/** N workers in this JVM with a collective group each; runs one function on every rank at once. */
public final class LocalCollectives implements AutoCloseable {

  private final LocalCluster cluster;
  private final List<Collectives> ranks = new ArrayList<>();
  private final ExecutorService pool;

  public LocalCollectives(int n, Duration timeout) throws Exception {
    this(n, timeout, Security.of(LocalCluster.TOKEN));
  }

  /** With {@code security} for the task servers and the ring (TLS when it has TLS files). */
  public LocalCollectives(int n, Duration timeout, Security security) throws Exception {
    cluster = LocalCluster.workers(n, CoordinationOptions.DEFAULTS.withHeartbeatTimeout(Duration.ofSeconds(5))
        .withJoinTimeout(Duration.ofSeconds(30)), security);
    pool = Executors.newFixedThreadPool(n);
    cluster.joinAll();
    List<CompletableFuture<Collectives>> created = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      TaskRuntime runtime = cluster.worker(i);
      created.add(CompletableFuture.supplyAsync(() -> Collectives.create(
          CollectiveGroup.of(cluster.cluster(), runtime.task()), "test", "127.0.0.1", runtime.agent(),
          security, CommunicationOptions.DEFAULTS, timeout), pool));
    }
    for (CompletableFuture<Collectives> c : created) {
      ranks.add(c.get(30, TimeUnit.SECONDS));
    }
  }

  public Collectives rank(int r) {
    return ranks.get(r);
  }

  public LocalCluster cluster() {
    return cluster;
  }

  /** Runs {@code op(collectives, rank)} on every rank concurrently; returns the results in rank order. */
  public <T> List<T> onAll(BiFunction<Collectives, Integer, T> op) throws Exception {
    List<CompletableFuture<T>> futures = new ArrayList<>();
    for (int r = 0; r < ranks.size(); r++) {
      int rank = r;
      futures.add(CompletableFuture.supplyAsync(() -> op.apply(ranks.get(rank), rank), pool));
    }
    List<T> results = new ArrayList<>();
    for (CompletableFuture<T> f : futures) {
      results.add(f.get(60, TimeUnit.SECONDS));
    }
    return results;
  }

  @Override
  public void close() {
    ranks.forEach(Collectives::close);
    pool.shutdownNow();
    cluster.close();
  }
}
