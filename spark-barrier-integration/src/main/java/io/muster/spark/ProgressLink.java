package io.muster.spark;

import io.muster.cluster.TaskId;
import io.muster.rpc.JobToken;
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
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
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * How the progress lines of in-JVM training ({@link TrainContext#progress}) reach the driver's
 * console: on a cluster the train function runs in executors on other hosts, whose logs the user
 * does not see. The driver listens on one TCP port per gang run; each task connects, presents the
 * job token and its task name, then sends one line per report (line breaks escaped). The driver logs
 * each at INFO (logger {@code io.muster.spark.Progress}) as the task wrote it; a connection without
 * the token is refused. A task that cannot
 * reach the driver logs its lines in its executor's log instead.
 */
final class ProgressLink {
  /** The driver's log of the tasks' progress. */
  static final Logger progress = LoggerFactory.getLogger("io.muster.spark.Progress");
  private static final Logger log = LoggerFactory.getLogger(ProgressLink.class);
  /** How long the driver waits, at the end of a run, for lines still on their way. */
  private static final Duration READ_REMAINING = Duration.ofSeconds(5);
  private static final Duration CONNECT = Duration.ofSeconds(10);

  private ProgressLink() {}

  /** The driver's default sink, and where a task's lines go when it cannot reach the driver. */
  static void toLog(String line) {
    progress.info("{}", line);
  }

  /** The driver's end. */
  static final class Receiver implements AutoCloseable {
    private final ServerSocket socket;
    private final String advertisedHost;
    private final JobToken token;
    private final Consumer<String> sink;
    private final List<Thread> readers = new CopyOnWriteArrayList<>();

    private Receiver(ServerSocket socket, String advertisedHost, JobToken token, Consumer<String> sink) {
      this.socket = socket;
      this.advertisedHost = advertisedHost;
      this.token = token;
      this.sink = sink;
    }

    /** Listens on {@code bindHost}; each line a task sends goes to {@code sink}. */
    static Receiver start(String bindHost, String advertisedHost, JobToken token, Consumer<String> sink) {
      try {
        ServerSocket socket = new ServerSocket();
        socket.bind(new InetSocketAddress(InetAddress.getByName(bindHost), 0));
        Receiver receiver = new Receiver(socket, advertisedHost, token, sink);
        Thread accept = new Thread(receiver::acceptLoop, "muster-progress");
        accept.setDaemon(true);
        accept.start();
        return receiver;
      } catch (IOException e) {
        throw new UncheckedIOException("cannot listen for the tasks' progress on " + bindHost + ": " + e.getMessage(), e);
      }
    }

    /** Where the tasks connect: {@code host:port}. */
    String address() {
      return advertisedHost + ":" + socket.getLocalPort();
    }

    private void acceptLoop() {
      while (!socket.isClosed()) {
        try {
          Socket connection = socket.accept();
          Thread reader = new Thread(() -> read(connection), "muster-progress-reader");
          reader.setDaemon(true);
          readers.add(reader);
          reader.start();
        } catch (IOException e) {
          return; // closed
        }
      }
    }

    private void read(Socket connection) {
      try (connection; BufferedReader in = new BufferedReader(
          new InputStreamReader(connection.getInputStream(), StandardCharsets.UTF_8))) {
        String presented = in.readLine();
        if (presented == null || !token.matches(presented)) {
          log.warn("refused a progress connection from {}: it did not present this job's token",
              connection.getRemoteSocketAddress());
          return;
        }
        in.readLine(); // the task's name, for a reader of the traffic
        for (String line = in.readLine(); line != null; line = in.readLine()) {
          sink.accept(CommandLogs.unescape(line));
        }
      } catch (IOException e) {
        log.debug("a progress connection from {} broke: {}", connection.getRemoteSocketAddress(), e.toString());
      }
    }

    /** Stops listening, then lets each connection deliver what its task sent before it finished. */
    @Override
    public void close() {
      try {
        socket.close();
      } catch (IOException ignored) {
        // closing
      }
      long deadline = System.nanoTime() + READ_REMAINING.toNanos();
      for (Thread reader : readers) {
        try {
          reader.join(Math.max(1, (deadline - System.nanoTime()) / 1_000_000));
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          return;
        }
      }
    }
  }

  /** A task's end. */
  static final class Sender implements AutoCloseable {
    private final TaskId task;
    private Socket socket;
    private Writer out;

    private Sender(TaskId task) {
      this.task = task;
    }

    /** Connects to the driver at {@code address}; when it cannot, the lines go to this executor's log. */
    static Sender connect(String address, String token, TaskId task) {
      Sender sender = new Sender(task);
      int colon = address.lastIndexOf(':');
      try {
        Socket socket = new Socket();
        socket.connect(new InetSocketAddress(address.substring(0, colon),
            Integer.parseInt(address.substring(colon + 1))), (int) CONNECT.toMillis());
        sender.socket = socket;
        sender.out = new BufferedWriter(new OutputStreamWriter(socket.getOutputStream(), StandardCharsets.UTF_8));
        sender.out.write(token + "\n" + task + "\n");
        sender.out.flush();
      } catch (IOException e) {
        log.warn("{}: cannot send progress to the driver at {} ({}); it goes to this executor's log", task, address,
            e.toString());
      }
      return sender;
    }

    synchronized void send(String line) {
      if (out != null) {
        try {
          out.write(CommandLogs.escape(line) + "\n");
          out.flush();
          return;
        } catch (IOException e) {
          log.warn("{}: lost the connection to the driver ({}); progress goes to this executor's log from here on",
              task, e.toString());
          out = null;
        }
      }
      toLog(line);
    }

    @Override
    public synchronized void close() {
      if (socket != null) {
        try {
          socket.close();
        } catch (IOException ignored) {
          // closing
        }
      }
    }
  }
}
