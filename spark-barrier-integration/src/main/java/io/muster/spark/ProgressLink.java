package io.muster.spark;

import io.muster.cluster.TaskId;
import io.muster.rpc.JobToken;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.Writer;
import java.net.Socket;
import java.util.Optional;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * How the progress lines of in-JVM training ({@link TrainContext#progress}) reach the driver's
 * console: on a cluster the train function runs in executors on other hosts, whose logs the user
 * does not see. The driver listens on one TCP port per gang run; each task connects, presents the
 * job token and its task name, then sends one line per report (line breaks escaped). The driver logs
 * each at INFO (logger {@code io.muster.spark.Progress}) as the task wrote it; a connection without
 * the token is refused. A task that cannot reach the driver logs its lines in its executor's log.
 */
final class ProgressLink {
  /** The driver's log of the tasks' progress. */
  static final Logger progress = LoggerFactory.getLogger("io.muster.spark.Progress");
  private static final Logger log = LoggerFactory.getLogger(ProgressLink.class);

  private ProgressLink() {}

  /** The driver's default sink, and where a task's lines go when it cannot reach the driver. */
  static void toLog(String line) {
    progress.info("{}", line);
  }

  /** The driver's end. */
  static final class Receiver implements AutoCloseable {
    private final JobToken token;
    private final Consumer<String> sink;
    private DriverListener listener;

    private Receiver(JobToken token, Consumer<String> sink) {
      this.token = token;
      this.sink = sink;
    }

    /** Listens on {@code bindHost}; each line a task sends goes to {@code sink}. */
    static Receiver start(String bindHost, String advertisedHost, JobToken token, Consumer<String> sink) {
      Receiver receiver = new Receiver(token, sink);
      receiver.listener = DriverListener.start(bindHost, advertisedHost, "muster-progress", "the tasks' progress",
          receiver::read);
      return receiver;
    }

    /** Where the tasks connect: {@code host:port}. */
    String address() {
      return listener.address();
    }

    private void read(Socket connection, InputStream input) {
      try (connection) {
        Optional<DriverListener.Presented> presented = DriverListener.presented(connection, input, token, "progress");
        if (presented.isEmpty()) {
          return;
        }
        BufferedReader in = presented.get().in();
        for (String line = in.readLine(); line != null; line = in.readLine()) {
          sink.accept(CommandLogs.unescape(line));
        }
      } catch (IOException e) {
        log.debug("a progress connection from {} broke: {}", connection.getRemoteSocketAddress(), e.toString());
      }
    }

    @Override
    public void close() {
      listener.close();
    }
  }

  /** A task's end. */
  static final class Sender implements AutoCloseable {
    private final TaskId task;
    private DriverListener.Link link;

    private Sender(TaskId task) {
      this.task = task;
    }

    /** Connects to the driver at {@code address}; when it cannot, the lines go to this executor's log. */
    static Sender connect(String address, String token, TaskId task) {
      Sender sender = new Sender(task);
      try {
        sender.link = DriverListener.connect(address, token, task);
      } catch (IOException e) {
        log.warn("{}: cannot send progress to the driver at {} ({}); it goes to this executor's log", task, address,
            e.toString());
      }
      return sender;
    }

    synchronized void send(String line) {
      if (link != null) {
        try {
          Writer out = link.out();
          out.write(CommandLogs.escape(line) + "\n");
          out.flush();
          return;
        } catch (IOException e) {
          log.warn("{}: lost the connection to the driver ({}); progress goes to this executor's log from here on",
              task, e.toString());
          close();
        }
      }
      toLog(line);
    }

    @Override
    public synchronized void close() {
      if (link != null) {
        try {
          link.socket().close();
        } catch (IOException ignored) {
          // closing
        }
        link = null;
      }
    }
  }
}
