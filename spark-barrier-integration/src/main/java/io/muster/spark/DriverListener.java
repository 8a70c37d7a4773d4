package io.muster.spark;

import io.muster.cluster.TaskId;
import io.muster.rpc.JobToken;
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BiConsumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The driver's end of a line link to the tasks of one gang run ({@link CommandLogs},
 * {@link ProgressLink}): one port, bound before its address is handed to the tasks, a reader thread
 * per connection, and a close that lets every reader finish what its task sent. A task connects
 * with {@link #connect}, which presents the job's token and the task's name first.
 *
 * <p>The close waits for a connection only while it delivers: one quiet for {@link #QUIET} is left
 * to its reader, which goes on logging what comes. A task on a host cut off from the driver sends
 * nothing more, not even its end, and the run's end (or its re-run) does not wait for it.
 */
final class DriverListener implements AutoCloseable {
  /** How long closing waits, at most, for the lines still on their way. */
  private static final Duration READ_REMAINING = Duration.ofSeconds(5);
  /** How long closing waits for a connection that delivers nothing. */
  static final Duration QUIET = Duration.ofSeconds(1);
  private static final Duration CONNECT = Duration.ofSeconds(10);
  /** How long a connection may take to present its token and task name. */
  private static final Duration HEADER = Duration.ofSeconds(10);
  private static final Logger log = LoggerFactory.getLogger(DriverListener.class);
  /** At the end, connections still waiting to be accepted are taken until none comes for this long. */
  private static final Duration BACKLOG_QUIET = Duration.ofMillis(100);

  private final ServerSocket socket;
  private final String advertisedHost;
  private final List<Reader> readers = new CopyOnWriteArrayList<>();
  private final String name;
  private final BiConsumer<Socket, InputStream> reader;

  private DriverListener(ServerSocket socket, String advertisedHost, String name,
      BiConsumer<Socket, InputStream> reader) {
    this.socket = socket;
    this.advertisedHost = advertisedHost;
    this.name = name;
    this.reader = reader;
  }

  /**
   * Listens on {@code bindHost} (port 0) and hands each connection to {@code reader} on a thread of
   * its own, named {@code name}-reader; {@code what} names the link in errors.
   */
  static DriverListener start(String bindHost, String advertisedHost, String name, String what,
      BiConsumer<Socket, InputStream> reader) {
    try {
      ServerSocket socket = new ServerSocket();
      socket.bind(new InetSocketAddress(InetAddress.getByName(bindHost), 0));
      DriverListener listener = new DriverListener(socket, advertisedHost, name, reader);
      Thread accept = new Thread(listener::acceptLoop, name);
      accept.setDaemon(true);
      accept.start();
      return listener;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot listen for " + what + " on " + bindHost + ": " + e.getMessage(), e);
    }
  }

  /** Where the tasks connect: {@code host:port}. */
  String address() {
    return advertisedHost + ":" + socket.getLocalPort();
  }

  private void acceptLoop() {
    while (!socket.isClosed()) {
      try {
        read(socket.accept());
      } catch (IOException e) {
        return; // closed
      }
    }
  }

  private void read(Socket connection) {
    AtomicLong lastHeard = new AtomicLong(System.nanoTime());
    Thread thread = new Thread(() -> {
      try {
        reader.accept(connection, heard(connection.getInputStream(), lastHeard));
      } catch (IOException e) {
        log.debug("a {} connection from {} broke at once: {}", name, connection.getRemoteSocketAddress(), e.toString());
        closeQuietly(connection);
      }
    }, name + "-reader");
    thread.setDaemon(true);
    readers.add(new Reader(thread, lastHeard));
    thread.start();
  }

  /** A connection's reader thread, and when its connection last delivered (nanoTime). */
  private record Reader(Thread thread, AtomicLong lastHeard) {}

  /** {@code in}, noting in {@code lastHeard} when each read returns. */
  private static InputStream heard(InputStream in, AtomicLong lastHeard) {
    return new FilterInputStream(in) {
      @Override
      public int read() throws IOException {
        int b = super.read();
        lastHeard.set(System.nanoTime());
        return b;
      }

      @Override
      public int read(byte[] buffer, int offset, int length) throws IOException {
        int n = super.read(buffer, offset, length);
        lastHeard.set(System.nanoTime());
        return n;
      }
    };
  }

  private static void closeQuietly(Socket connection) {
    try {
      connection.close();
    } catch (IOException ignored) {
      // closing
    }
  }

  /** A connection that presented this job's token: its reader, past the token and the task's name line. */
  record Presented(BufferedReader in, String taskName) {}

  /**
   * Reads what {@link #connect} sends first, the token and the task's name, within
   * {@link #HEADER}; when the token is not this job's, logs that the {@code what} connection was
   * refused and returns empty. Reads after it have no deadline: a task may be silent for hours.
   */
  static Optional<Presented> presented(Socket connection, InputStream input, JobToken token, String what)
      throws IOException {
    connection.setSoTimeout((int) HEADER.toMillis());
    BufferedReader in = new BufferedReader(new InputStreamReader(input, StandardCharsets.UTF_8));
    String presented = in.readLine();
    if (presented == null || !token.matches(presented)) {
      log.warn("refused a {} connection from {}: it did not present this job's token", what,
          connection.getRemoteSocketAddress());
      return Optional.empty();
    }
    String taskName = in.readLine();
    connection.setSoTimeout(0);
    return Optional.of(new Presented(in, taskName));
  }

  /** A task's connection to the driver, the token and the task's name already sent. */
  record Link(Socket socket, Writer out) {}

  /** Connects to the driver at {@code address} ({@code host:port}) as {@code task}. */
  static Link connect(String address, String token, TaskId task) throws IOException {
    int colon = address.lastIndexOf(':');
    Socket socket = new Socket();
    try {
      socket.connect(new InetSocketAddress(address.substring(0, colon), Integer.parseInt(address.substring(colon + 1))),
          (int) CONNECT.toMillis());
      Writer out = writer(socket);
      out.write(token + "\n" + task + "\n");
      out.flush();
      return new Link(socket, out);
    } catch (IOException | RuntimeException e) {
      socket.close();
      throw e;
    }
  }

  /** A buffered UTF-8 writer on the connection. */
  static Writer writer(Socket socket) throws IOException {
    return new BufferedWriter(new OutputStreamWriter(socket.getOutputStream(), StandardCharsets.UTF_8));
  }

  /** Stops listening, then lets each connection deliver what its task sent before it finished. */
  @Override
  public void close() {
    try {
      // A task that connected just before the end may still wait in the backlog: take it before closing.
      socket.setSoTimeout((int) BACKLOG_QUIET.toMillis());
      while (true) {
        read(socket.accept());
      }
    } catch (IOException quiet) {
      // no connection for BACKLOG_QUIET
    }
    try {
      socket.close();
    } catch (IOException ignored) {
      // closing
    }
    long closing = System.nanoTime();
    long deadline = closing + READ_REMAINING.toNanos();
    for (Reader reader : readers) {
      try {
        while (reader.thread().isAlive()) {
          long now = System.nanoTime();
          if (now >= deadline || now - Math.max(closing, reader.lastHeard().get()) >= QUIET.toNanos()) {
            break; // quiet: its reader logs whatever still comes
          }
          reader.thread().join(50);
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
  }
}
