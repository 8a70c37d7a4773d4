package io.muster.spark;

import io.muster.cluster.TaskId;
import io.muster.launch.EndOfJob;
import io.muster.launch.GangSpec;
import io.muster.launch.OnPreemption;
import io.muster.launch.Rerun;
import io.muster.launch.TaskProcess;
import io.muster.rpc.JobToken;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.Writer;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The link between the tasks of an external-command run and the driver. The driver listens on one
 * TCP port; every task connects, presents the job token and its task name, then sends
 * {@code task TAB stream TAB text} lines with its command's output (Spark leaves it in each
 * executor's stderr otherwise) and {@code task TAB EXIT TAB code [TAB story]} when the command has
 * exited, the story saying in the task's words how it failed (the stderr tail included).
 * The driver applies the launch core's {@link EndOfJob} rule to the exits, and when every tracked
 * task has exited 0 it sends {@code END} to the untracked tasks still running (the ps tasks of a
 * {@code ParameterServerStrategy} job, which never exit by themselves), which then end their
 * commands. When the gang fails (a command exits non-zero, or a task's link closes before its
 * command's exit was reported: the task failed or was killed) it sends
 * {@code FAILED TAB own|retryable|preempted TAB reason} to every task, which then ends its command
 * with the failure grace period instead of waiting for Spark's abort of the stage, and fails with
 * the first task's story and the same verdict on a retry. A cluster's failure is sent at once; a command's
 * own failure ({@link Rerun}) after {@link Rerun#CAUSE_WINDOW}, unless a cluster's failure taken
 * for its cause comes first; the task whose command failed waits for that word before it fails.
 *
 * <p>A task whose executor is decommissioned or shutting down ({@link ExecutorNotices}) sends
 * {@code task TAB NOTICE TAB reason}; the driver passes the first notice on to every task as
 * {@code NOTICE TAB reason}, and each sends its command the preemption signal ({@link OnPreemption}).
 * From then on a command that exits with the saved exit code is followed by the others for up to
 * {@link OnPreemption#SAVED_PEERS_WAIT} (TensorFlow's chief, which hosts the coordination service,
 * leaves last); when they have all exited, at that deadline, or at once on any other failure, the
 * gang fails as preempted, with the story of who saved, and is re-run without counting.
 * Multi-line texts travel with their line breaks escaped. Output streaming is best effort (a task
 * that cannot reach the driver logs the lines in its executor's log); an untracked task cannot run
 * without the link.
 *
 * <p>Each end sends {@code BEAT} every {@link #BEAT_EVERY}: a host that loses power or its link
 * resets nothing, and its connections stay open while nothing arrives. A task the driver has not
 * heard from for {@link #SILENT} fails the gang (retryable: the cluster's failure), and a task that
 * has not heard from the driver for {@link #DRIVER_SILENT} ends its command as for a failed gang.
 * An end that was itself paused (a long GC) does not judge the silence it slept through.
 *
 * <p>One file because it holds both ends of one wire protocol: a change to a message changes the
 * driver's side and the task's side together.
 */
final class CommandLogs {
  static final Logger log = LoggerFactory.getLogger(CommandLogs.class);
  private static final String EXIT = "EXIT";
  private static final String END = "END";
  private static final String FAILED = "FAILED";
  private static final String NOTICE = "NOTICE";
  private static final String BEAT = "BEAT";
  static final Duration BEAT_EVERY = Duration.ofSeconds(1);
  /** How long the driver waits for a word from a task before it takes the task's host for lost. */
  static final Duration SILENT = Duration.ofSeconds(10);
  /** Longer than {@link #SILENT}: the driver, which sees every task, is the one to name the lost host. */
  static final Duration DRIVER_SILENT = Duration.ofSeconds(15);

  private CommandLogs() {}

  /** How a re-run judges a failed gang. */
  enum Verdict {
    /** The user's own failure: a re-run would repeat it. */
    OWN,
    /** The cluster's failure: a re-run may succeed. */
    RETRYABLE,
    /** The gang left for a preemption notice: re-run without counting, from what it saved. */
    PREEMPTED
  }

  /** Why the gang failed, as the driver tells the tasks: the first failure's story, and its verdict. */
  record GangFailed(String reason, Verdict verdict) {
    GangFailed(String reason, boolean usersOwn) {
      this(reason, usersOwn ? Verdict.OWN : Verdict.RETRYABLE);
    }

    boolean usersOwn() {
      return verdict == Verdict.OWN;
    }

    boolean preempted() {
      return verdict == Verdict.PREEMPTED;
    }
  }

  /** {@code text} on one line: backslashes and line breaks escaped. */
  static String escape(String text) {
    return text.replace("\\", "\\\\").replace("\n", "\\n");
  }

  /** What {@link #escape} was given. */
  static String unescape(String line) {
    StringBuilder text = new StringBuilder(line.length());
    for (int i = 0; i < line.length(); i++) {
      char c = line.charAt(i);
      if (c == '\\' && i + 1 < line.length()) {
        char next = line.charAt(++i);
        text.append(next == 'n' ? '\n' : next);
      } else {
        text.append(c);
      }
    }
    return text.toString();
  }

  /** A daemon thread running {@code beat} every {@link #BEAT_EVERY}, told how long since its last run. */
  private static ScheduledExecutorService beating(String name, Consumer<Duration> beat) {
    ScheduledExecutorService beats = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, name);
      t.setDaemon(true);
      return t;
    });
    long[] last = {System.nanoTime()};
    beats.scheduleWithFixedDelay(() -> {
      long now = System.nanoTime();
      beat.accept(Duration.ofNanos(now - last[0]));
      last[0] = now;
    }, BEAT_EVERY.toMillis(), BEAT_EVERY.toMillis(), TimeUnit.MILLISECONDS);
    return beats;
  }

  /** Whether a beat {@code sinceLastBeat} after the previous one means this JVM itself was paused. */
  private static boolean paused(Duration sinceLastBeat) {
    return sinceLastBeat.compareTo(BEAT_EVERY.multipliedBy(3)) > 0;
  }

  /** The default sink on the driver: {@code [worker 2] text} at INFO. */
  static void toLog(CommandLine line) {
    log.info("[{}] {}", line.task(), line.text());
  }

  /** The driver's end. */
  static final class Receiver implements AutoCloseable {
    private final JobToken token;
    private final Consumer<CommandLine> sink;
    private final EndOfJob endOfJob;
    private final GangSpec gang;
    private final int savedExitCode;
    private DriverListener listener;
    private final Map<TaskId, Writer> tasks = new ConcurrentHashMap<>();
    /** Untracked tasks told to end before their connection was read; guarded by {@code this}. */
    private final Set<TaskId> endRequested = new HashSet<>();
    /** The exit code of each task whose command's exit was reported; guarded by {@code this}. */
    private final Map<TaskId, Integer> exitCodes = new HashMap<>();
    /** The first preemption notice a task passed on, once the tasks have been told; guarded by {@code this}. */
    private String preemptionNotice;
    /** Whether a command has exited saying it saved for the notice; guarded by {@code this}. */
    private boolean savedExitSeen;
    /** Why the gang failed, once the tasks have been told; guarded by {@code this}. */
    private GangFailed gangFailure;
    /** A command's own failure waiting {@link Rerun#CAUSE_WINDOW} for a cluster's failure; guarded by {@code this}. */
    private String ownFailure;
    /** When each connected task last sent anything, and from where. */
    private final Map<TaskId, Long> lastHeard = new ConcurrentHashMap<>();
    private final Map<TaskId, Socket> connections = new ConcurrentHashMap<>();
    /** Tasks taken for lost; their connections are closed, so that the driver does not wait on them. */
    private final Set<TaskId> silent = ConcurrentHashMap.newKeySet();
    private ScheduledExecutorService beats;

    private Receiver(JobToken token, Consumer<CommandLine> sink, GangSpec gang, int savedExitCode) {
      this.token = token;
      this.sink = sink;
      this.endOfJob = new EndOfJob(gang);
      this.gang = gang;
      this.savedExitCode = savedExitCode;
    }

    /** @param savedExitCode the exit code by which a command says it saved for a preemption notice */
    static Receiver start(String bindHost, String advertisedHost, JobToken token, Consumer<CommandLine> sink,
        GangSpec gang, int savedExitCode) {
      Receiver receiver = new Receiver(token, sink, gang, savedExitCode);
      receiver.listener = DriverListener.start(bindHost, advertisedHost, "muster-command-logs", "the commands' logs",
          receiver::read);
      receiver.beats = beating("muster-command-logs-beat", receiver::beat);
      return receiver;
    }

    /** Where the tasks connect: {@code host:port}. */
    String address() {
      return listener.address();
    }

    private void read(Socket connection, InputStream input) {
      TaskId task = null;
      try (connection) {
        Optional<DriverListener.Presented> presented = DriverListener.presented(connection, input, token, "log");
        if (presented.isEmpty()) {
          return;
        }
        BufferedReader in = presented.get().in();
        task = parseTask(presented.get().taskName());
        connections.put(task, connection);
        lastHeard.put(task, System.nanoTime());
        register(task, DriverListener.writer(connection));
        String line;
        while ((line = in.readLine()) != null) {
          lastHeard.put(task, System.nanoTime());
          String[] parts = line.split("\t", 3);
          if (parts.length != 3 || parts[1].equals(BEAT)) {
            continue;
          }
          if (parts[1].equals(EXIT)) {
            String[] exit = parts[2].split("\t", 2);
            exited(task, Integer.parseInt(exit[0]), exit.length == 2 ? unescape(exit[1]) : "");
          } else if (parts[1].equals(NOTICE)) {
            noticed(task, unescape(parts[2]));
          } else {
            sink.accept(new CommandLine(parts[0], TaskProcess.Stream.valueOf(parts[1]), parts[2]));
          }
        }
      } catch (IOException | IllegalArgumentException e) {
        if (task == null || !silent.contains(task)) {
          log.warn("a command log connection from {} broke: {}", connection.getRemoteSocketAddress(), e.toString());
        }
      } finally {
        if (task != null) {
          linkClosed(task);
        }
      }
    }

    /** Tells every connected task the driver is alive, and fails the gang for a task that has gone silent. */
    private void beat(Duration sinceLastBeat) {
      Optional<TaskId> lost = beatAndFindSilent(sinceLastBeat);
      if (lost.isPresent()) {
        Socket connection = connections.get(lost.get());
        InetAddress host = connection.getInetAddress();
        // named outside the lock: a reverse lookup may take seconds
        lost(lost.get(), connection, host.getHostName() + " (" + host.getHostAddress() + ")");
      }
    }

    private synchronized Optional<TaskId> beatAndFindSilent(Duration sinceLastBeat) {
      long now = System.nanoTime();
      if (paused(sinceLastBeat)) { // the driver itself did not run: what arrived meanwhile is unread
        lastHeard.replaceAll((task, heard) -> now);
      }
      tasks.forEach((task, out) -> send(task, out, BEAT));
      if (endOfJob.verdict() instanceof EndOfJob.Succeeded || gangFailure != null) {
        return Optional.empty();
      }
      return lastHeard.entrySet().stream()
          .filter(heard -> Duration.ofNanos(now - heard.getValue()).compareTo(SILENT) >= 0)
          .map(Map.Entry::getKey).filter(task -> tasks.containsKey(task) && !exitCodes.containsKey(task)).findFirst();
    }

    /** Fails the gang for a task gone silent, and closes its connection: nothing more will come on it. */
    private synchronized void lost(TaskId task, Socket connection, String host) {
      clusterFailed(task + " on " + host + " went silent: no word from its task for " + SILENT.toSeconds()
          + " s (its host is down or cut off from the driver)");
      silent.add(task);
      try {
        connection.close(); // its reader ends
      } catch (IOException ignored) {
        // closing
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
        sendFailure(task, out, gangFailure);
        return;
      }
      if (preemptionNotice != null) {
        send(task, out, NOTICE + "\t" + escape(preemptionNotice));
      }
      if (endRequested.remove(task)) {
        sendEnd(task, out);
      }
    }

    /** A task's link closed: before its command's exit was reported, the task failed (or was killed). */
    private synchronized void linkClosed(TaskId task) {
      tasks.remove(task);
      lastHeard.remove(task);
      connections.remove(task);
      if (!exitCodes.containsKey(task) && !(endOfJob.verdict() instanceof EndOfJob.Succeeded)) {
        clusterFailed(task + "'s task ended before its command's exit was reported (the task failed or was killed)");
      }
    }

    /** Tells every task still running that the gang has failed, and the tasks that connect later. */
    private void gangFailed(GangFailed failure) {
      if (gangFailure != null) {
        return;
      }
      endOfJob.settle();
      gangFailure = failure;
      // The driver's one failure line names the failure; this is for the debug log.
      log.debug("the gang has failed: {}; ending the other tasks' commands", failure.reason());
      tasks.forEach((task, out) -> sendFailure(task, out, failure));
    }

    /** A failure of the cluster's (a task lost or killed); after a preemption notice, the preemption's. */
    private void clusterFailed(String reason) {
      if (preemptionNotice != null) {
        preempted();
      } else {
        gangFailed(new GangFailed(reason, false));
      }
    }

    /** No cluster's failure came within the cause window: the command's own failure is the gang's. */
    private synchronized void ownFailureStands() {
      if (preemptionNotice != null) {
        preempted(); // the notice came meanwhile: the command may have failed for the signal
      } else {
        gangFailed(new GangFailed(ownFailure, true));
      }
    }

    private static void sendFailure(TaskId task, Writer out, GangFailed failure) {
      send(task, out, FAILED + "\t" + failure.verdict().name().toLowerCase(Locale.ROOT) + "\t"
          + escape(failure.reason()));
    }

    /**
     * A task passed on its executor's preemption notice: the first one goes to every task, which
     * sends its command the preemption signal. A notice after the gang's end changes nothing.
     */
    private synchronized void noticed(TaskId task, String reason) {
      if (preemptionNotice != null || gangFailure != null || endOfJob.verdict() instanceof EndOfJob.Succeeded) {
        return;
      }
      preemptionNotice = "preemption notice for " + task + " (" + reason + ")";
      log.warn("{}; every command is sent the preemption signal to save and leave", preemptionNotice);
      tasks.forEach((each, out) -> send(each, out, NOTICE + "\t" + escape(preemptionNotice)));
    }

    /**
     * After a notice, a tracked command exited with {@code code}: the gang leaves as preempted when a
     * command failed otherwise, or every tracked command has exited, or
     * {@link OnPreemption#SAVED_PEERS_WAIT} after the first one saved.
     */
    private void exitedAfterNotice(int code) {
      if (code != 0 && code != savedExitCode || gang.tasks().stream().filter(gang::isTracked)
          .allMatch(exitCodes::containsKey)) {
        preempted();
      } else if (code == savedExitCode && !savedExitSeen) {
        savedExitSeen = true;
        beats.schedule(() -> {
          synchronized (this) {
            preempted();
          }
        }, OnPreemption.SAVED_PEERS_WAIT.toMillis(), TimeUnit.MILLISECONDS);
      }
    }

    private void preempted() {
      gangFailed(new GangFailed(preemptionReport(), Verdict.PREEMPTED));
    }

    /** The notice, and how each tracked command answered it: saved, finished, or not saved and how. */
    private String preemptionReport() {
      List<String> saved = new ArrayList<>();
      List<String> notSaved = new ArrayList<>();
      for (TaskId task : gang.tasks()) {
        Integer code = exitCodes.get(task);
        if (code != null && (code == savedExitCode || code == 0)) {
          saved.add(task.toString());
        } else if (gang.isTracked(task)) {
          notSaved.add(task + (code == null ? " (still running)" : " (exit code " + code + ")"));
        }
      }
      return preemptionNotice + "; " + (notSaved.isEmpty() ? "every task saved (exit code " + savedExitCode + ")"
          : (saved.isEmpty() ? "" : "saved by " + String.join(", ", saved) + "; ") + "not saved by "
              + String.join(", ", notSaved) + ": the next attempt resumes from the last backup");
    }

    /** A task's command exited with {@code code}; {@code story} is the task's account of a failure. */
    private synchronized void exited(TaskId task, int code, String story) {
      exitCodes.put(task, code);
      EndOfJob.Verdict before = endOfJob.verdict();
      EndOfJob.Verdict verdict = endOfJob.exited(task, code);
      if (preemptionNotice != null && gangFailure == null && !(verdict instanceof EndOfJob.Succeeded)) {
        if (gang.isTracked(task)) { // a ps server the signal ended is expected; the tracked commands decide
          exitedAfterNotice(code);
        }
        return;
      }
      if (verdict instanceof EndOfJob.Failed failed && failed.task().equals(task) && gangFailure == null) {
        // Every task fails with the same story and verdict, so the driver tells it whichever task's
        // failure Spark reports first. A command's own failure waits for a cluster's failure that caused it.
        String reason = story.isEmpty() ? task + "'s command exited with code " + code : story;
        if (!failed.isCommandsOwn()) {
          gangFailed(new GangFailed(reason, false));
        } else if (before instanceof EndOfJob.Running) {
          ownFailure = reason;
          beats.schedule(this::ownFailureStands, Rerun.CAUSE_WINDOW.toMillis(), TimeUnit.MILLISECONDS);
        }
      }
      if (before instanceof EndOfJob.Running && verdict instanceof EndOfJob.Succeeded done && !done.toEnd().isEmpty()) {
        log.info("the tasks the job awaits have all finished; ending {}", done.toEnd());
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
      beats.shutdownNow();
      listener.close();
    }
  }

  /** A task's end: the line sink of its {@link TaskProcess}, its exit report and the driver's word to end. */
  static final class Sender implements TaskProcess.LineSink, AutoCloseable {
    private final TaskId task;
    private Socket socket;
    private Writer out;
    private boolean endRequested;
    private Runnable onEnd;
    private GangFailed gangFailure;
    private Consumer<GangFailed> onGangFailure;
    private Consumer<String> onNotice;
    private volatile long lastFromDriver = System.nanoTime();
    private ScheduledExecutorService beats;

    private Sender(TaskId task) {
      this.task = task;
    }

    /** Connects to the driver; when it cannot, the lines go to this executor's log. */
    static Sender connect(String address, String token, TaskId task) {
      Sender sender = new Sender(task);
      try {
        DriverListener.Link link = DriverListener.connect(address, token, task);
        Socket socket = link.socket();
        sender.socket = socket;
        sender.out = link.out();
        Thread listener = new Thread(() -> sender.listen(socket), "muster-driver-link-" + task.job() + "-"
            + task.index());
        listener.setDaemon(true);
        listener.start();
        sender.beats = beating("muster-driver-link-beat-" + task.job() + "-" + task.index(),
            since -> sender.beat(since, address));
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

    /** Runs {@code action} when the driver says the gang has failed (at once if it already has). */
    void onGangFailure(Consumer<GangFailed> action) {
      GangFailed failure;
      synchronized (this) {
        if (gangFailure == null) {
          onGangFailure = action;
          return;
        }
        failure = gangFailure;
      }
      action.accept(failure);
    }

    /** Runs {@code action} with the gang's preemption notice when the driver passes one on. */
    synchronized void onNotice(Consumer<String> action) {
      onNotice = action;
    }

    /** Tells the driver this task's executor announced a preemption, for the driver to tell the gang. */
    synchronized void noticed(String reason) {
      send(NOTICE, escape(reason));
    }

    /** The driver's word that the gang has failed, waiting up to {@code limit} for it; empty without a link. */
    synchronized Optional<GangFailed> awaitGangFailure(Duration limit) throws InterruptedException {
      long deadline = System.nanoTime() + limit.toNanos();
      while (gangFailure == null && out != null && System.nanoTime() < deadline) {
        TimeUnit.NANOSECONDS.timedWait(this, deadline - System.nanoTime());
      }
      return Optional.ofNullable(gangFailure);
    }

    /** Tells the driver this task is alive; takes a driver silent for {@link #DRIVER_SILENT} for a failed gang. */
    private void beat(Duration sinceLastBeat, String driver) {
      long now = System.nanoTime();
      if (paused(sinceLastBeat)) {
        lastFromDriver = now;
      }
      boolean linked;
      synchronized (this) {
        linked = send(BEAT, "");
      }
      Duration silence = Duration.ofNanos(now - lastFromDriver);
      if (linked && silence.compareTo(DRIVER_SILENT) >= 0) {
        log.error("{}: no word from the driver at {} for {} s; ending the command", task, driver,
            DRIVER_SILENT.toSeconds());
        gangFailed(new GangFailed("the driver at " + driver + " went silent: no word for " + DRIVER_SILENT.toSeconds()
            + " s (this host or the driver's is down or cut off)", false));
        beats.shutdown();
      }
    }

    private void gangFailed(GangFailed failure) {
      Consumer<GangFailed> action;
      synchronized (this) {
        if (gangFailure != null) {
          return;
        }
        gangFailure = failure;
        action = onGangFailure;
        notifyAll();
      }
      if (action != null) {
        action.accept(failure);
      }
    }

    private void listen(Socket socket) {
      try {
        BufferedReader in = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
          lastFromDriver = System.nanoTime();
          String[] parts = line.split("\t", 3);
          if (parts.length == 3 && parts[0].equals(FAILED)) {
            gangFailed(new GangFailed(unescape(parts[2]), Verdict.valueOf(parts[1].toUpperCase(Locale.ROOT))));
          } else if (parts.length == 2 && parts[0].equals(NOTICE)) {
            Consumer<String> action;
            synchronized (this) {
              action = onNotice;
            }
            if (action != null) {
              action.accept(unescape(parts[1]));
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

    /** Tells the driver the command exited with {@code code}; {@code story} says how it failed (or is empty). */
    synchronized void exited(int code, String story) {
      send(EXIT, story.isEmpty() ? Integer.toString(code) : code + "\t" + escape(story));
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
      if (beats != null) {
        beats.shutdownNow();
      }
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
