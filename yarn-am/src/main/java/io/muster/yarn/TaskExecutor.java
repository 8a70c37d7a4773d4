package io.muster.yarn;

import io.grpc.Channel;
import io.grpc.StatusRuntimeException;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.cluster.TaskType;
import io.muster.internal.Durations;
import io.muster.internal.FileTrees;
import io.muster.internal.rpc.ChannelCache;
import io.muster.launch.Attempt;
import io.muster.launch.Gang;
import io.muster.launch.GangEndpoint;
import io.muster.launch.GangMember;
import io.muster.launch.Heartbeats;
import io.muster.launch.TaskEnvironment;
import io.muster.launch.TaskProcess;
import io.muster.proto.gang.AwaitNextAttemptRequest;
import io.muster.proto.gang.AwaitNextAttemptResponse;
import io.muster.proto.gang.GangServiceGrpc;
import io.muster.proto.gang.TaskRef;
import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.security.Credentials;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.yarn.api.ApplicationConstants;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What YARN starts in each container of the gang: reserves a port and holds it until the command
 * starts, joins the gang of its attempt through the ApplicationMaster's {@link GangEndpoint} with
 * {@code host:port} ({@link GangMember}), waits for the whole gang, then runs the task's command
 * ({@code /bin/sh -c}) with its {@code TF_CONFIG} and {@code MUSTER_*} variables, its output in the
 * container's {@code stdout} and {@code stderr}, and reports its exit. Meanwhile the master tells it
 * to go on, save for a preemption (the job's preemption signal), end (an untracked task whose job is
 * done) or abort (the attempt failed); an executor that loses its master ends its command and
 * exits, so no command outlives its job.
 *
 * <p>When its attempt failed, the executor offers its container to the next attempt and waits (at
 * most {@link #NEXT_ATTEMPT_WAIT}): it runs the task the master names there, as above, or exits when
 * there is none. A restart then starts no JVM and waits for no allocation.
 *
 * <p>Arguments: {@code MASTER_HOST:PORT JOB INDEX ATTEMPT}; the job from {@value Handoff#JOB_ENV},
 * the token and TLS material from the container's credentials.
 */
public final class TaskExecutor {

  private static final Logger log = LoggerFactory.getLogger(TaskExecutor.class);
  private static final Duration GRACE = Duration.ofSeconds(10);
  /**
   * How long an executor that offered its container waits for the next attempt: longer than the
   * master takes to end a failed attempt (it stops commands that do not end within 15 s, and
   * releases containers whose nodes do not confirm the stop 15 s later).
   */
  static final Duration NEXT_ATTEMPT_WAIT = Duration.ofSeconds(60);
  private static final String HADOOP_USER_NAME = "HADOOP_USER_NAME";
  /** The argument that makes this a warm-up run for {@link ExecutorArchive}. */
  static final String WARM_UP = "--warm-up";

  private TaskExecutor() {}

  public static void main(String[] args) throws Exception {
    HostPort master = HostPort.parse(args[0]);
    TaskId task = new TaskId(args[1], Integer.parseInt(args[2]));
    YarnJob job = Handoff.job();
    Credentials credentials = containerCredentials();
    Optional<JobToken> secret = Handoff.token(credentials);
    if (secret.isEmpty()) {
      log.error("{}: the job token is not in the container's credentials", task);
      System.exit(1);
    }
    Path containerDir = Path.of("").toAbsolutePath(); // where YARN put the shipped files
    Security security = Handoff.security(secret.get(), credentials, containerDir);
    TaskRef ref = TaskRef.newBuilder().setJob(task.job()).setIndex(task.index()).setAttempt(Integer.parseInt(args[3]))
        .setContainerId(System.getenv(ApplicationConstants.Environment.CONTAINER_ID.name())).build();
    String host = System.getenv(ApplicationConstants.Environment.NM_HOST.name());
    try (ChannelCache channels = new ChannelCache(security)) {
      Channel channel = channels.get(master);
      while (true) {
        Ended ended = run(channel, master, ref, job, security, host);
        Optional<TaskRef> next = ended.offerContainer() ? awaitNextAttempt(channel, ref) : Optional.empty();
        if (next.isEmpty()) {
          System.exit(ended.exitCode());
        }
        ref = next.get();
      }
    }
  }

  /** How the executor's part in an attempt ended: its exit code, and whether to offer the container to the next. */
  record Ended(int exitCode, boolean offerContainer) {}

  /** Offers the container to the next attempt: the task it runs there, or empty when it is not wanted. */
  private static Optional<TaskRef> awaitNextAttempt(Channel channel, TaskRef ref) {
    TaskId task = GangEndpoint.taskOf(ref);
    log.info("{}: {} failed; offering the container to the next attempt (waiting up to {})", task,
        Attempt.named(ref.getAttempt()), Durations.words(NEXT_ATTEMPT_WAIT));
    try {
      AwaitNextAttemptResponse answer = GangServiceGrpc.newBlockingStub(channel)
          .withDeadlineAfter(NEXT_ATTEMPT_WAIT.toMillis(), TimeUnit.MILLISECONDS)
          .awaitNextAttempt(AwaitNextAttemptRequest.newBuilder().setTask(ref).build());
      if (answer.hasNext()) {
        log.info("{}: runs {} in {}", task, GangEndpoint.taskOf(answer.getNext()),
            Attempt.named(answer.getNext().getAttempt()));
        return Optional.of(answer.getNext());
      }
      log.info("{}: the container is not wanted for a next attempt: {}", task, answer.getReason());
    } catch (StatusRuntimeException e) {
      log.warn("{}: no next attempt for the container: {}", task, e.getStatus());
    }
    return Optional.empty();
  }

  /**
   * The container's credentials, read from the file YARN names: lighter than a Hadoop login, which
   * the executor does not need (it talks to its master only).
   */
  private static Credentials containerCredentials() throws IOException {
    String file = System.getenv(UserGroupInformation.HADOOP_TOKEN_FILE_LOCATION);
    return file == null ? new Credentials()
        : Credentials.readTokenStorageFile(new java.io.File(file), new Configuration(false));
  }

  /** One attempt of this executor's task: join, wait for the gang, run the command, report its exit. */
  static Ended run(Channel channel, HostPort master, TaskRef ref, YarnJob job, Security security, String host)
      throws IOException, InterruptedException {
    TaskId task = GangEndpoint.taskOf(ref);
    int attempt = ref.getAttempt();
    TaskType type = TaskType.ofJobName(task.job()).orElseThrow();
    Instructions instructions = new Instructions(task, job.preemption().signal());
    List<HostPort> addresses;
    GangMember member;
    try (ServerSocket reserved = new ServerSocket()) {
      reserved.setReuseAddress(true);
      reserved.bind(new InetSocketAddress(InetAddress.getByName(host), 0));
      HostPort address = new HostPort(host, reserved.getLocalPort());
      member = GangMember.join(channel, ref, address, host, "the ApplicationMaster at " + master, instructions,
          Clock.systemUTC());
      log.info("{}: joined at {}{}; waiting for the gang", task, address, startCost());
      try {
        addresses = member.awaitGang(job.gangTimeout().plus(Heartbeats.CALL));
      } catch (GangMember.GangEndedException e) {
        log.error("{}", e.getMessage());
        // the attempt ended before its gang formed: the master may want the container for the next
        boolean offer = member.exited(new Attempt.Exit(1, true, "ended before the gang formed", List.of()));
        member.close();
        return new Ended(1, offer);
      }
    } // the port is free again: the command binds it next
    try (member) {
      return runCommand(member, instructions, task, attempt, type, job, security, job.gang().formed(addresses));
    }
  }

  private static Ended runCommand(GangMember member, Instructions instructions, TaskId task, int attempt,
      TaskType type, YarnJob job, Security security, Gang gang) throws IOException, InterruptedException {
    log.debug("{}: the gang's addresses: {}", task, gang.addresses());
    Path containerDir = Path.of("").toAbsolutePath();
    Path workDir = Files.createTempDirectory(containerDir, "muster-work-");
    Map<String, String> env = new LinkedHashMap<>();
    // Without Kerberos a Hadoop client is whoever HADOOP_USER_NAME (else the OS) says; the container's
    // process may belong to the NodeManager's user, so name the submitting user (Kerberos ignores it).
    Optional.ofNullable(System.getenv(ApplicationConstants.Environment.USER.name()))
        .filter(user -> System.getenv(HADOOP_USER_NAME) == null)
        .ifPresent(user -> env.put(HADOOP_USER_NAME, user));
    env.putAll(job.environment());
    env.putAll(Handoff.tlsEnvironment(security));
    env.putAll(TaskEnvironment.of(gang, job.gang().member(task), attempt, gpus(job.resources().get(type).gpus()),
        workDir, job.outputDir(), security.token()));
    TaskEnvironment.putTemporaryDirectory(env, workDir);
    PrintStream out = System.out;
    PrintStream err = System.err;
    log.info("{}: the gang is formed; starting `{}` ({})", task, job.commands().get(type), Attempt.named(attempt));
    // The shell traps the preemption signal, which goes to the whole process group: it lives on for
    // its child, the training command, to save, then exits with the child's code (a list's later
    // commands do not run; nor after the SIGTERM that ends an aborted attempt).
    try (TaskProcess process = TaskProcess.start(task.toString(), List.of("/bin/sh", "-c",
        "trap exit " + job.preemption().signal() + "; " + job.commands().get(type)), env, containerDir,
        (stream, line) -> (stream == TaskProcess.Stream.STDOUT ? out : err).println(line), 30, GRACE)) {
      instructions.attach(process);
      int code = process.waitFor(Duration.ofDays(365 * 100)).orElseThrow();
      Instructions.Told told = instructions.told();
      boolean offerContainer = member.exited(Attempt.Exit.ofCommand(code, process.stderrTail(),
          told != Instructions.Told.NOTHING));
      if (told == Instructions.Told.END) {
        log.info("{}: ended the command: the tasks the job awaits have all finished", task);
        return new Ended(0, false);
      }
      log.info("{}: the command exited with code {}", task, code);
      if (offerContainer) { // the task's private directory goes with the task, not with the container, which lives on
        try {
          FileTrees.delete(workDir);
        } catch (IOException e) {
          log.warn("{}: cannot delete the task's directory {}: {}", task, workDir, e.toString());
        }
      }
      return new Ended(code == 0 && told == Instructions.Told.NOTHING ? 0 : 1, offerContainer);
    }
  }

  /** What the master told the executor, applied to the command once it runs. */
  private static final class Instructions implements GangMember.Listener {
    enum Told { NOTHING, END, ABORT }

    private final TaskId task;
    private final String preemptionSignal;
    private TaskProcess process; // guarded by this
    private Told told = Told.NOTHING; // guarded by this
    private String notice; // guarded by this
    private boolean signalled; // guarded by this

    Instructions(TaskId task, String preemptionSignal) {
      this.task = task;
      this.preemptionSignal = preemptionSignal;
    }

    synchronized Told told() {
      return told;
    }

    void attach(TaskProcess process) {
      synchronized (this) {
        this.process = process;
      }
      apply();
    }

    @Override
    public void preempt(String notice) {
      synchronized (this) {
        this.notice = notice;
      }
      apply();
    }

    @Override
    public void end() {
      tell(Told.END, "every tracked task has finished");
    }

    @Override
    public void abort(String reason) {
      tell(Told.ABORT, reason);
    }

    private void tell(Told what, String reason) {
      synchronized (this) {
        if (told != Told.NOTHING) {
          return;
        }
        told = what;
      }
      log.info("{}: the master says {}: {}", task, what, reason);
      apply();
    }

    /** Ends or signals the command as told, once it runs; on the member's listener thread or the starter's. */
    private void apply() {
      TaskProcess running;
      boolean signal;
      Told what;
      synchronized (this) {
        running = process;
        what = told;
        signal = running != null && notice != null && !signalled && what == Told.NOTHING;
        signalled |= signal;
      }
      if (running == null) {
        return;
      }
      if (signal) {
        log.warn("{}: {}; sending the command SIG{} to save and leave", task, notice, preemptionSignal);
        running.signal(preemptionSignal);
      }
      if (what != Told.NOTHING) {
        running.close();
      }
    }
  }

  /** What this JVM's start has cost so far, as a log line says it: {@code " 3695 ms after its JVM started, 1240 ms of CPU"}. */
  static String startCost() {
    // the JVM's own clock: a process's start time from the OS is only as fine as the boot time's second
    return " " + ManagementFactory.getRuntimeMXBean().getUptime() + " ms after its JVM started"
        + ProcessHandle.current().info().totalCpuDuration().map(cpu -> ", " + cpu.toMillis() + " ms of CPU").orElse("");
  }

  /** The container's GPUs: YARN's assignment when it set one, else devices 0..n-1 of the node. */
  private static List<String> gpus(int count) {
    if (count == 0) {
      return List.of();
    }
    String assigned = Optional.ofNullable(System.getenv("CUDA_VISIBLE_DEVICES"))
        .or(() -> Optional.ofNullable(System.getenv("NVIDIA_VISIBLE_DEVICES"))).orElse("");
    return assigned.isBlank() ? IntStream.range(0, count).mapToObj(Integer::toString).toList()
        : List.of(assigned.split(","));
  }
}
