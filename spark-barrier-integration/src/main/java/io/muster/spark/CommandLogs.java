package io.muster.spark;

import io.muster.cluster.TaskId;
import io.muster.launch.EndOfJob;
import io.muster.launch.GangSpec;
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
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The link between the tasks of an external-command run and the driver. The driver listens on one
 * TCP port; every task connects, presents the job token and its task name, then sends
 * {@code task TAB stream TAB text} lines with its command's output (Spark leaves it in each
 * executor's stderr otherwise) and {@code task TAB EXIT TAB code} when the command has exited.
 * The driver applies the launch core's {@link EndOfJob} rule to the exits, and when every tracked
 * task has exited 0 it sends {@code END} to the untracked tasks still running (the ps tasks of a
 * {@code ParameterServerStrategy} job, which never exit by themselves), which then end their
 * commands. When the gang fails (a command exits non-zero, or a task's link closes before its
 * command's exit was reported: the task failed or was killed) it sends {@code FAILED TAB reason}
 * to every other task at once, which then ends its command with the failure grace period instead
 * of waiting for Spark's abort of the stage. Output streaming is best effort (a task that cannot reach the driver logs the lines in
 * its executor's log); an untracked task cannot run without the link.
 */
final class CommandLogs {
  static final Logger log = LoggerFactory.getLogger(CommandLogs.class);
  /** How long the driver waits, at the end of a run, for lines still on their way. */
  private static final Duration READ_REMAINING = Duration.ofSeconds(5);
  private static final String EXIT = "EXIT";
  private static final String END = "END";
  private static final String FAILED = "FAILED";

  private CommandLogs() {}

  /** The default sink on the driver: {@code [worker 2] text} at INFO. */
  static void toLog(CommandLine line) {
    log.info("[{}] {}", line.task(), line.text());
  }

  /** The driver's end. */
  static final class Receiver implements AutoCloseable {
    private final ServerSocket socket;
    private final String advertisedHost;
    private final JobToken token;
    private final Consumer<CommandLine> sink;
    private final EndOfJob endOfJob;
    private final List<Thread> readers = new CopyOnWriteArrayList<>();
    private final Map<TaskId, Writer> tasks = new ConcurrentHashMap<>();
    /** Untracked tasks told to end before their connection was read; guarded by {@code this}. */
    private final Set<TaskId> endRequested = new HashSet<>();
    /** Tasks whose command's exit was reported; guarded by {@code this}. */
    private final Set<TaskId> exitReported = new HashSet<>();
    /** Why the gang failed, once it has; guarded by {@code this}. */
    private String gangFailure;

    private Receiver(ServerSocket socket, String advertisedHost, JobToken token, Consumer<CommandLine> sink,
        GangSpec gang) {
      this.socket = socket;
      this.advertisedHost = advertisedHost;
      this.token = token;
      this.sink = sink;
      this.endOfJob = new EndOfJob(gang);
    }

    static Receiver start(String bindHost, String advertisedHost, JobToken token, Consumer<CommandLine> sink,
        GangSpec gang) {
      try {
        ServerSocket socket = new ServerSocket();
        socket.bind(new InetSocketAddress(InetAddress.getByName(bindHost), 0));
        Receiver receiver = new Receiver(socket, advertisedHost, token, sink, gang);
        Thread accept = new Thread(receiver::acceptLoop, "muster-command-logs");
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

    private void acceptLoop() {
      while (!socket.isClosed()) {
        try {
          Socket connection = socket.accept();
          Thread reader = new Thread(() -> read(connection), "muster-command-logs-reader");
          reader.setDaemon(true);
          readers.add(reader);
          reader.start();
        } catch (IOException e) {
          return; // closed
        }
      }
    }

    private void read(Socket connection) {
      TaskId task = null;
      try (connection; BufferedReader in = new BufferedReader(
          new InputStreamReader(connection.getInputStream(), StandardCharsets.UTF_8))) {
        String presented = in.readLine();
        if (presented == null || !token.matches(presented)) {
          log.warn("refused a log connection from {}: it did not present this job's token",
              connection.getRemoteSocketAddress());
          return;
        }
        task = parseTask(in.readLine());
        register(task, new BufferedWriter(new OutputStreamWriter(connection.getOutputStream(), StandardCharsets.UTF_8)));
        String line;
        while ((line = in.readLine()) != null) {
          String[] parts = line.split("\t", 3);
          if (parts.length != 3) {
            continue;
          }
          if (parts[1].equals(EXIT)) {
            exited(task, Integer.parseInt(parts[2]));
          } else {
            sink.accept(new CommandLine(parts[0], TaskProcess.Stream.valueOf(parts[1]), parts[2]));
          }
        }
      } catch (IOException | IllegalArgumentException e) {
        log.warn("a command log connection from {} broke: {}", connection.getRemoteSocketAddress(), e.toString());
      } finally {
        if (task != null) {
          linkClosed(task);
        }
      }
    }

    private static TaskId parseTask(String name) {
      int space = name == null ? -1 : name.lastIndexOf(' ');
      if (space <= 0) {
        throw new IllegalArgumentException("expected the task's name after the token, got '" + name + "'");
      }
      return new TaskId(name.substring(0, space), Integer.parseInt(name.substring(space + 1)));
    }

    private synchronized void register(TaskId task, Writer out) {
      tasks.put(task, out);
      if (gangFailure != null) {
        send(task, out, FAILED + "\t" + gangFailure);
      } else if (endRequested.remove(task)) {
        sendEnd(task, out);
      }
    }

    /** A task's link closed: before its command's exit was reported, the task failed (or was killed). */
    private synchronized void linkClosed(TaskId task) {
      tasks.remove(task);
      if (!exitReported.contains(task) && endOfJob.verdict() instanceof EndOfJob.Running) {
        gangFailed(task + "'s task ended before its command's exit was reported (the task failed or was killed)");
      }
    }

    /** Tells every task still running that the gang has failed, and the tasks that connect later. */
    private void gangFailed(String reason) {
      if (gangFailure != null) {
        return;
      }
      gangFailure = reason;
      // The driver's one failure line names the failure; this is for the debug log.
      log.debug("the gang has failed: {}; ending the other tasks' commands", reason);
      tasks.forEach((task, out) -> send(task, out, FAILED + "\t" + reason));
    }

    private synchronized void exited(TaskId task, int code) {
      exitReported.add(task);
      EndOfJob.Verdict before = endOfJob.verdict();
      EndOfJob.Verdict verdict = endOfJob.exited(task, code);
      if (before instanceof EndOfJob.Running && verdict instanceof EndOfJob.Failed failed) {
        // A command's own exit code fails the run without a retry; the other tasks' errors quote the
        // reason, so the driver recognises it whichever task's failure Spark reports first.
        boolean own = failed.exitCode() <= 128 && failed.exitCode() != ExternalCommand.EX_TEMPFAIL;
        gangFailed(failed.task() + "'s command exited with code " + failed.exitCode()
            + (own ? " (" + UsersFailureException.class.getName() + ": the command's own failure)" : ""));
      }
      if (before instanceof EndOfJob.Running && verdict instanceof EndOfJob.Succeeded done && !done.toEnd().isEmpty()) {
        log.info("every tracked task has finished; ending {}", done.toEnd());
        for (TaskId untracked : done.toEnd()) {
          Writer out = tasks.get(untracked);
          if (out == null) {
            endRequested.add(untracked);
          } else {
            sendEnd(untracked, out);
          }
        }
      }
    }

    private static void sendEnd(TaskId task, Writer out) {
      send(task, out, END);
    }

    private static void send(TaskId task, Writer out, String line) {
      try {
        out.write(line + "\n");
        out.flush();
      } catch (IOException e) {
        log.warn("cannot tell {} {} ({}); Spark ends it with the stage", task, line, e.toString());
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

  /** A task's end: the line sink of its {@link TaskProcess}, its exit report and the driver's word to end. */
  static final class Sender implements TaskProcess.LineSink, AutoCloseable {
    private final TaskId task;
    private Socket socket;
    private Writer out;
    private boolean endRequested;
    private Runnable onEnd;
    private String gangFailure;
    private java.util.function.Consumer<String> onGangFailure;

    private Sender(TaskId task) {
      this.task = task;
    }

    /** Connects to the driver; when it cannot, the lines go to this executor's log. */
    static Sender connect(String address, String token, TaskId task) {
      Sender sender = new Sender(task);
      int colon = address.lastIndexOf(':');
      try {
        Socket socket = new Socket();
        socket.connect(new InetSocketAddress(address.substring(0, colon),
            Integer.parseInt(address.substring(colon + 1))), 10_000);
        sender.socket = socket;
        sender.out = new BufferedWriter(new OutputStreamWriter(socket.getOutputStream(), StandardCharsets.UTF_8));
        sender.out.write(token + "\n" + task + "\n");
        sender.out.flush();
        Thread listener = new Thread(() -> sender.listen(socket), "muster-driver-link-" + task.job() + "-"
            + task.index());
        listener.setDaemon(true);
        listener.start();
      } catch (IOException e) {
        log.warn("{}: cannot stream the command's output to the driver at {} ({}); it goes to this executor's log",
            task, address, e.toString());
        sender.out = null;
      }
      return sender;
    }

    synchronized boolean connected() {
      return out != null;
    }

    /** Runs {@code action} when the driver says this task should end (at once if it already has). */
    void onEnd(Runnable action) {
      synchronized (this) {
        if (!endRequested) {
          onEnd = action;
          return;
        }
      }
      action.run();
    }

    /**
     * Runs {@code action} with the reason when the driver says the gang has failed (at once if it
     * already has).
     */
    void onGangFailure(java.util.function.Consumer<String> action) {
      String reason;
      synchronized (this) {
        if (gangFailure == null) {
          onGangFailure = action;
          return;
        }
        reason = gangFailure;
      }
      action.accept(reason);
    }

    private void listen(Socket socket) {
      try {
        BufferedReader in = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
          if (line.startsWith(FAILED + "\t")) {
            String reason = line.substring(FAILED.length() + 1);
            java.util.function.Consumer<String> action;
            synchronized (this) {
              gangFailure = reason;
              action = onGangFailure;
            }
            if (action != null) {
              action.accept(reason);
            }
          } else if (line.equals(END)) {
            Runnable action;
            synchronized (this) {
              endRequested = true;
              action = onEnd;
            }
            if (action != null) {
              action.run();
            }
          }
        }
      } catch (IOException e) {
        // the connection closed with the task
      }
    }

    @Override
    public synchronized void line(TaskProcess.Stream stream, String text) {
      if (send(stream.name(), text)) {
        return;
      }
      toLog(new CommandLine(task.toString(), stream, text));
    }

    /** Tells the driver the command exited with {@code code}. */
    synchronized void exited(int code) {
      send(EXIT, Integer.toString(code));
    }

    private boolean send(String kind, String text) {
      if (out != null) {
        try {
          out.write(task + "\t" + kind + "\t" + text + "\n");
          out.flush();
          return true;
        } catch (IOException e) {
          log.warn("{}: lost the connection to the driver ({}); the command's output goes to this executor's "
              + "log from here on", task, e.toString());
          out = null;
        }
      }
      return false;
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
