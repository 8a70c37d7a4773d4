package io.muster.spark;

import io.muster.launch.TaskProcess;
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
 * The external commands' output, streamed from the tasks to the driver's log (Spark leaves it in
 * each executor's stderr otherwise). The driver listens on one TCP port; every task connects,
 * presents the job token, and sends {@code task TAB stream TAB text} lines. Streaming is best
 * effort: a task that cannot reach the driver logs the lines in its executor's log instead.
 */
final class CommandLogs {
  static final Logger log = LoggerFactory.getLogger(CommandLogs.class);
  /** How long the driver waits, at the end of a run, for lines still on their way. */
  private static final Duration READ_REMAINING = Duration.ofSeconds(5);

  private CommandLogs() {}

  /** The default sink on the driver: {@code [worker 2] text} at INFO. */
  static void toLog(CommandLine line) {
    log.info("[{}] {}", line.task(), line.text());
  }

  /** The driver's end. */
  static final class Receiver implements AutoCloseable {
    private final ServerSocket socket;
    private final String advertisedHost;
    private final List<Thread> readers = new CopyOnWriteArrayList<>();

    private Receiver(ServerSocket socket, String advertisedHost) {
      this.socket = socket;
      this.advertisedHost = advertisedHost;
    }

    static Receiver start(String bindHost, String advertisedHost, JobToken token, Consumer<CommandLine> sink) {
      try {
        ServerSocket socket = new ServerSocket();
        socket.bind(new InetSocketAddress(InetAddress.getByName(bindHost), 0));
        Receiver receiver = new Receiver(socket, advertisedHost);
        Thread accept = new Thread(() -> receiver.acceptLoop(token, sink), "muster-command-logs");
        accept.setDaemon(true);
        accept.start();
        return receiver;
      } catch (IOException e) {
        throw new UncheckedIOException("cannot listen for the commands' logs on " + bindHost + ": " + e.getMessage(), e);
      }
    }

    /** Where the tasks connect: {@code host:port}. */
    String address() {
      return advertisedHost + ":" + socket.getLocalPort();
    }

    private void acceptLoop(JobToken token, Consumer<CommandLine> sink) {
      while (!socket.isClosed()) {
        try {
          Socket connection = socket.accept();
          Thread reader = new Thread(() -> read(connection, token, sink), "muster-command-logs-reader");
          reader.setDaemon(true);
          readers.add(reader);
          reader.start();
        } catch (IOException e) {
          return; // closed
        }
      }
    }

    private static void read(Socket connection, JobToken token, Consumer<CommandLine> sink) {
      try (connection; BufferedReader in = new BufferedReader(
          new InputStreamReader(connection.getInputStream(), StandardCharsets.UTF_8))) {
        String presented = in.readLine();
        if (presented == null || !token.matches(presented)) {
          log.warn("refused a log connection from {}: it did not present this job's token",
              connection.getRemoteSocketAddress());
          return;
        }
        String line;
        while ((line = in.readLine()) != null) {
          String[] parts = line.split("\t", 3);
          if (parts.length == 3) {
            sink.accept(new CommandLine(parts[0], TaskProcess.Stream.valueOf(parts[1]), parts[2]));
          }
        }
      } catch (IOException | IllegalArgumentException e) {
        log.warn("a command log connection from {} broke: {}", connection.getRemoteSocketAddress(), e.toString());
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

  /** A task's end: the line sink of its {@link TaskProcess}. */
  static final class Sender implements TaskProcess.LineSink, AutoCloseable {
    private final String task;
    private Socket socket;
    private Writer out;

    private Sender(String task) {
      this.task = task;
    }

    /** Connects to the driver; when it cannot, the lines go to this executor's log. */
    static Sender connect(String address, String token, String task) {
      Sender sender = new Sender(task);
      if (address == null) {
        return sender;
      }
      int colon = address.lastIndexOf(':');
      try {
        Socket socket = new Socket();
        socket.connect(new InetSocketAddress(address.substring(0, colon),
            Integer.parseInt(address.substring(colon + 1))), 10_000);
        sender.socket = socket;
        sender.out = new BufferedWriter(new OutputStreamWriter(socket.getOutputStream(), StandardCharsets.UTF_8));
        sender.out.write(token + "\n");
        sender.out.flush();
      } catch (IOException e) {
        log.warn("{}: cannot stream the command's output to the driver at {} ({}); it goes to this executor's log",
            task, address, e.toString());
        sender.out = null;
      }
      return sender;
    }

    @Override
    public synchronized void line(TaskProcess.Stream stream, String text) {
      if (out != null) {
        try {
          out.write(task + "\t" + stream.name() + "\t" + text + "\n");
          out.flush();
          return;
        } catch (IOException e) {
          log.warn("{}: lost the connection to the driver's log ({}); the command's output goes to this executor's "
              + "log from here on", task, e.toString());
          out = null;
        }
      }
      toLog(new CommandLine(task, stream, text));
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
