package io.muster.spark;

import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.launch.GangSpec;
import io.muster.rpc.JobToken;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.Writer;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.stream.IntStream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * How the tasks of one gang run learn each other's addresses, through the driver: each task
 * connects, presents the job token, its member number and the address its server is bound to, and
 * waits; once every member has joined, the driver answers each with every address in member
 * order, at once. It replaces Spark's {@code allGather}, which polls its RPC once a second and waits
 * {@code spark.barrier.sync.timeout} (a year by default) for a task that never comes.
 *
 * <p>The gang must form within its timeout, counted from the start of the run, so it covers
 * Spark finding slots for the whole barrier stage, each task reading its partition, and the
 * exchange. When it passes, the driver answers the waiting tasks with why (the members missing
 * and what {@code explainMissing} found out about them), and hands the same words to
 * {@code onTimeout}, which ends the run's job: nothing waits past the deadline.
 */
final class GangRendezvous implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(GangRendezvous.class);
  private static final String FORMED = "gang ";
  private static final String FAILED = "failed ";
  private static final String RUN_ENDED = "the run ended before the gang formed (another task failed?)";
  /** How long past the gang timeout a task waits for the driver's answer before it gives up on the driver. */
  private static final Duration ANSWER_GRACE = Duration.ofSeconds(30);
  private static final Duration JOIN_LINE = Duration.ofSeconds(10);

  private final GangSpec gang;
  private final JobToken token;
  private final Duration timeout;
  private final Function<List<Integer>, String> explainMissing;
  private final Consumer<String> onTimeout;
  private final TreeMap<Integer, Joined> joined = new TreeMap<>();
  private final ScheduledExecutorService timer;
  private DriverListener listener;
  private boolean formed;
  private boolean ended;
  private String failure;

  private record Joined(HostPort address, Socket socket, Writer out) {}

  private GangRendezvous(GangSpec gang, JobToken token, Duration timeout, Function<List<Integer>, String> explainMissing,
      Consumer<String> onTimeout) {
    this.gang = gang;
    this.token = token;
    this.timeout = timeout;
    this.explainMissing = explainMissing;
    this.onTimeout = onTimeout;
    this.timer = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "muster-gang-deadline");
      t.setDaemon(true);
      return t;
    });
  }

  /**
   * Listens on {@code bindHost} for the members of {@code gang}; the clock starts now.
   *
   * @param explainMissing what is known of the members (numbers) that have not joined, in words
   * @param onTimeout runs once, off the caller's thread, with the failure when the gang does not form in time
   */
  static GangRendezvous start(String bindHost, String advertisedHost, JobToken token, GangSpec gang, Duration timeout,
      Function<List<Integer>, String> explainMissing, Consumer<String> onTimeout) {
    GangRendezvous rendezvous = new GangRendezvous(gang, token, timeout, explainMissing, onTimeout);
    rendezvous.listener = DriverListener.start(bindHost, advertisedHost, "muster-rendezvous", "the gang's addresses",
        rendezvous::read);
    rendezvous.timer.schedule(rendezvous::expire, timeout.toMillis(), TimeUnit.MILLISECONDS);
    return rendezvous;
  }

  /** Where the tasks connect: {@code host:port}. */
  String address() {
    return listener.address();
  }

  /** Why the gang did not form, once its timeout has passed without it. */
  synchronized Optional<String> failure() {
    return Optional.ofNullable(failure);
  }

  private void read(Socket connection, InputStream input) {
    try {
      Optional<DriverListener.Presented> presented = DriverListener.presented(connection, input, token, "rendezvous");
      if (presented.isEmpty()) {
        connection.close();
        return;
      }
      connection.setSoTimeout((int) JOIN_LINE.toMillis()); // the member line follows the header at once
      String[] joining = String.valueOf(presented.get().in().readLine()).split(" ", 2);
      connection.setSoTimeout(0);
      join(Integer.parseInt(joining[0]), HostPort.parse(joining[1]), connection);
    } catch (IOException | RuntimeException e) {
      log.debug("a rendezvous connection from {} broke: {}", connection.getRemoteSocketAddress(), e.toString());
      closeQuietly(connection);
    }
  }

  private synchronized void join(int member, HostPort address, Socket connection) throws IOException {
    Writer out = DriverListener.writer(connection);
    String refusal = failure != null ? failure
        : ended ? RUN_ENDED
        : formed ? "the gang has already formed"
        : member < 0 || member >= gang.size() ? "member " + member + " is not in the gang " + gang
        : joined.containsKey(member) ? gang.task(member) + " has already joined"
        : null;
    if (refusal != null) {
      answer(new Joined(address, connection, out), FAILED + refusal);
      return;
    }
    joined.put(member, new Joined(address, connection, out));
    if (joined.size() == gang.size()) {
      formed = true;
      timer.shutdownNow();
      String addresses = FORMED + String.join(" ", joined.values().stream().map(j -> j.address().toString()).toList());
      joined.values().forEach(j -> answer(j, addresses));
    }
  }

  private void expire() {
    String why;
    synchronized (this) {
      if (formed || ended) {
        return;
      }
      List<Integer> missing = IntStream.range(0, gang.size()).filter(m -> !joined.containsKey(m)).boxed().toList();
      why = "the gang did not form within " + timeout.toSeconds() + " s (the gang timeout): "
          + explainMissing.apply(missing);
      failure = why;
      joined.values().forEach(j -> answer(j, FAILED + why));
    }
    log.warn("{}", why);
    onTimeout.accept(why);
  }

  private static void answer(Joined member, String line) {
    try {
      member.out().write(CommandLogs.escape(line) + "\n");
      member.out().flush();
    } catch (IOException e) {
      log.debug("could not answer a member of the gang at {}: {}", member.address(), e.toString());
    } finally {
      closeQuietly(member.socket());
    }
  }

  /** Stops listening; a member still waiting is answered that the run has ended. */
  @Override
  public void close() {
    timer.shutdownNow();
    listener.close();
    synchronized (this) {
      ended = true;
      if (!formed && failure == null) {
        joined.values().forEach(j -> answer(j, FAILED + RUN_ENDED));
      }
    }
  }

  private static void closeQuietly(Socket socket) {
    try {
      socket.close();
    } catch (IOException ignored) {
      // closing
    }
  }

  /** A task's end: one exchange, which {@link #close} (Spark killing the task) breaks off. */
  static final class Member implements AutoCloseable {
    private final String driver;
    private final String token;
    private final TaskId task;
    private volatile Socket socket;
    private volatile boolean closed;

    Member(String driver, String token, TaskId task) {
      this.driver = driver;
      this.token = token;
      this.task = task;
    }

    /**
     * Joins as {@code member} with {@code address} and returns every member's address, in member
     * order, once the whole gang has joined.
     *
     * @throws IllegalStateException when the gang did not form (the driver's words), or the driver cannot be reached
     */
    List<HostPort> exchange(int member, HostPort address, Duration gangTimeout) {
      try {
        DriverListener.Link link = DriverListener.connect(driver, token, task);
        socket = link.socket();
        if (closed) {
          socket.close();
        }
        link.out().write(member + " " + address + "\n");
        link.out().flush();
        socket.setSoTimeout((int) gangTimeout.plus(ANSWER_GRACE).toMillis());
        String answer = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8))
            .readLine();
        if (answer == null) {
          throw new IllegalStateException(task + ": the driver at " + driver + " closed the gang's rendezvous "
              + "without an answer");
        }
        answer = CommandLogs.unescape(answer);
        if (answer.startsWith(FAILED)) {
          throw new IllegalStateException(task + ": " + answer.substring(FAILED.length()));
        }
        return Arrays.stream(answer.substring(FORMED.length()).split(" ")).map(HostPort::parse).toList();
      } catch (SocketTimeoutException e) {
        throw new IllegalStateException(task + ": the driver at " + driver + " did not answer the gang's rendezvous "
            + "within the gang timeout of " + gangTimeout.toSeconds() + " s and " + ANSWER_GRACE.toSeconds() + " s more",
            e);
      } catch (IOException e) {
        throw new IllegalStateException(task + ": " + (closed ? "killed during" : "lost the driver at " + driver
            + " during") + " the gang's rendezvous: " + e.getMessage(), e);
      } finally {
        close();
      }
    }

    @Override
    public void close() {
      closed = true;
      Socket s = socket;
      if (s != null) {
        closeQuietly(s);
      }
    }
  }
}
