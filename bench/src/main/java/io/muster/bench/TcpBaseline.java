package io.muster.bench;

import io.muster.internal.Json;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * The raw-TCP baseline: two JVMs, one {@link SocketChannel} with direct buffers, both directions
 * busy at once: each side sends SIZE bytes while it receives SIZE bytes. The client prints the
 * median exchange time and the bandwidth per direction for each size.
 *
 * <p>{@code TcpBaseline server} prints its port; {@code TcpBaseline client PORT SIZE...} measures.
 */
public final class TcpBaseline {
  private TcpBaseline() {}

  public static void main(String[] args) throws Exception {
    if (args[0].equals("server")) {
      try (ServerSocketChannel server = ServerSocketChannel.open().bind(new InetSocketAddress("127.0.0.1", 0))) {
        System.out.println(((InetSocketAddress) server.getLocalAddress()).getPort());
        System.out.flush();
        try (SocketChannel channel = server.accept()) {
          configure(channel);
          ByteBuffer size = ByteBuffer.allocate(8);
          while (readFully(channel, size.clear())) {
            exchangeLoop(channel, (int) size.getLong(0));
          }
        }
      }
      return;
    }
    int port = Integer.parseInt(args[1]);
    try (SocketChannel channel = SocketChannel.open(new InetSocketAddress("127.0.0.1", port))) {
      configure(channel);
      for (int i = 2; i < args.length; i++) {
        int bytes = Integer.parseInt(args[i]);
        channel.write(ByteBuffer.allocate(8).putLong(0, bytes));
        long[] times = exchangeLoop(channel, bytes);
        Arrays.sort(times);
        double median = times[times.length / 2] / 1e9;
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("method", "tcp-baseline");
        line.put("bytes", bytes);
        line.put("median_s", median);
        line.put("gbps_per_direction", bytes / median / 1e9);
        System.out.println(Json.write(line));
        System.out.flush();
      }
    }
  }

  /**
   * Both sides run the same loop: the first exchange agrees on the round count (the client's
   * choice, about a second's worth), then every round sends and receives {@code bytes} at once.
   */
  private static long[] exchangeLoop(SocketChannel channel, int bytes) {
    ByteBuffer out = ByteBuffer.allocateDirect(Math.max(bytes, 8));
    ByteBuffer in = ByteBuffer.allocateDirect(Math.max(bytes, 8));
    long start = System.nanoTime();
    exchange(channel, out, in, bytes);
    long one = Math.max(1, System.nanoTime() - start);
    int rounds = (int) Math.max(5, Math.min(50_000, 1_000_000_000L / one));
    out.clear().putLong(0, rounds);
    exchange(channel, out, in, 8);
    rounds = (int) Math.max(rounds, in.getLong(0));
    long[] times = new long[rounds];
    for (int i = 0; i < rounds; i++) {
      long t0 = System.nanoTime();
      exchange(channel, out, in, bytes);
      times[i] = System.nanoTime() - t0;
    }
    return times;
  }

  private static void exchange(SocketChannel channel, ByteBuffer out, ByteBuffer in, int bytes) {
    out.clear().limit(bytes);
    in.clear().limit(bytes);
    CompletableFuture<Void> send = CompletableFuture.runAsync(() -> {
      try {
        while (out.hasRemaining()) {
          channel.write(out);
        }
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }, SENDER);
    readFully(channel, in);
    send.join();
  }

  private static final java.util.concurrent.Executor SENDER = java.util.concurrent.Executors.newSingleThreadExecutor(r -> {
    Thread t = new Thread(r, "tcp-baseline-send");
    t.setDaemon(true);
    return t;
  });

  private static boolean readFully(SocketChannel channel, ByteBuffer into) {
    try {
      while (into.hasRemaining()) {
        if (channel.read(into) < 0) {
          return false;
        }
      }
      return true;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static void configure(SocketChannel channel) throws IOException {
    channel.setOption(StandardSocketOptions.TCP_NODELAY, true);
    channel.setOption(StandardSocketOptions.SO_SNDBUF, 4 << 20);
    channel.setOption(StandardSocketOptions.SO_RCVBUF, 4 << 20);
  }
}
