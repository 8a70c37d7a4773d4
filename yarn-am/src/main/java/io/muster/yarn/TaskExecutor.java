package io.muster.yarn;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.cluster.TaskType;
import io.muster.internal.Durations;
import io.muster.internal.rpc.ChannelCache;
import io.muster.internal.rpc.TaskServer;
import io.muster.launch.Gang;
import io.muster.launch.GangSpec;
import io.muster.launch.Rerun;
import io.muster.launch.TaskEnvironment;
import io.muster.launch.TaskProcess;
import io.muster.proto.gang.AwaitGangRequest;
import io.muster.proto.gang.AwaitGangResponse;
import io.muster.proto.gang.AwaitNextAttemptRequest;
import io.muster.proto.gang.AwaitNextAttemptResponse;
import io.muster.proto.gang.ExitedRequest;
import io.muster.proto.gang.ExitedResponse;
import io.muster.proto.gang.GangServiceGrpc;
import io.muster.proto.gang.HeartbeatRequest;
import io.muster.proto.gang.HeartbeatResponse;
import io.muster.proto.gang.RegisterRequest;
import io.muster.proto.gang.RegisterResponse;
import io.muster.proto.gang.TaskRef;
import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import java.io.File;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.IntStream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.security.Credentials;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.yarn.api.ApplicationConstants;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What YARN starts in each container of the gang: reserves a port and holds it until the command
 * starts, registers {@code host:port} with the ApplicationMaster, waits for the whole gang, then
 * runs the task's command ({@code /bin/sh -c}) with its {@code TF_CONFIG} and {@code MUSTER_*}
 * variables, its output in the container's {@code stdout} and {@code stderr}. It heartbeats every
 * second; the master answers whether to go on, end (an untracked task whose job is done) or abort
 * (the attempt failed). An executor that cannot reach its master for {@link #MASTER_LOST} ends its
 * command and exits, so no command outlives its job; so does one the master no longer counts in its
 * attempt (it was cut off, and the master timed it out and went on).
 *
 * <p>When its attempt failed, the executor offers its container to the next attempt and waits (at
 * most {@link #NEXT_ATTEMPT_WAIT}): it runs the task the master names there, as above, or exits when
 * there is none. A restart then starts no JVM and waits for no allocation.
 *
 * <p>Arguments: {@code MASTER_HOST:PORT JOB INDEX ATTEMPT}; the job from {@value Handoff#JOB_ENV},
 * the token from the container's credentials.
 */
public final class TaskExecutor {

  private static final Logger log = LoggerFactory.getLogger(TaskExecutor.class);
  static final Duration HEARTBEAT = Duration.ofSeconds(1);
  static final Duration MASTER_LOST = Duration.ofSeconds(15);
  private static final Duration CALL = Duration.ofSeconds(10);
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
    if (args.length == 1 && args[0].equals(WARM_UP)) {
      System.exit(warmUp());
    }
    HostPort master = HostPort.parse(args[0]);
    TaskId task = new TaskId(args[1], Integer.parseInt(args[2]));
    YarnJob job = Handoff.job();
    Optional<JobToken> secret = Handoff.token(containerCredentials());
    if (secret.isEmpty()) {
      log.error("{}: the job token is not in the container's credentials", task);
      System.exit(1);
    }
    JobToken token = secret.get();
    TaskRef ref = TaskRef.newBuilder().setJob(task.job()).setIndex(task.index()).setAttempt(Integer.parseInt(args[3]))
        .setContainerId(System.getenv(ApplicationConstants.Environment.CONTAINER_ID.name())).build();
    String host = System.getenv(ApplicationConstants.Environment.NM_HOST.name());
    try (ChannelCache channels = new ChannelCache(Security.of(token))) {
      GangServiceGrpc.GangServiceBlockingStub stub = GangServiceGrpc.newBlockingStub(channels.get(master));
      while (true) {
        Ended ended = run(stub, ref, job, token, host);
        Optional<TaskRef> next = ended.offerContainer() ? awaitNextAttempt(stub, ref) : Optional.empty();
        if (next.isEmpty()) {
          System.exit(ended.exitCode());
        }
        ref = next.get();
      }
    }
  }

  /** How the executor's part in an attempt ended: its exit code, and whether to offer the container to the next. */
  private record Ended(int exitCode, boolean offerContainer) {}

  /** Offers the container to the next attempt: the task it runs there, or empty when it is not wanted. */
  private static Optional<TaskRef> awaitNextAttempt(GangServiceGrpc.GangServiceBlockingStub stub, TaskRef ref) {
    TaskId task = GangEndpoint.taskOf(ref);
    log.info("{}: attempt {} failed; offering the container to the next attempt (waiting up to {})", task,
        ref.getAttempt() + 1, Durations.words(NEXT_ATTEMPT_WAIT));
    try {
      AwaitNextAttemptResponse answer = stub.withDeadlineAfter(NEXT_ATTEMPT_WAIT.toMillis(), TimeUnit.MILLISECONDS)
          .awaitNextAttempt(AwaitNextAttemptRequest.newBuilder().setTask(ref).build());
      if (answer.hasNext()) {
        log.info("{}: runs {} in attempt {}", task, GangEndpoint.taskOf(answer.getNext()),
            answer.getNext().getAttempt() + 1);
        return Optional.of(answer.getNext());
      }
      log.info("{}: the container is not wanted for a next attempt: {}", task, answer.getReason());
    } catch (StatusRuntimeException e) {
      log.warn("{}: no next attempt for the container: {}", task, e.getStatus());
    }
    return Optional.empty();
  }

  /**
   * What {@link ExecutorArchive} records: one executor's whole run, as in a container, against a
   * master in this JVM that answers every call at once, with a command that exits at once. The
   * classes it loads are the archive's.
   */
  static int warmUp() throws Exception {
    JobToken token = JobToken.random();
    TaskId task = new TaskId(TaskType.WORKER.jobName(), 0);
    Credentials credentials = new Credentials();
    Handoff.putToken(credentials, token.value());
    File tokens = File.createTempFile("muster-warm-up", ".tokens", new File("."));
    try {
      credentials.writeTokenStorageFile(new org.apache.hadoop.fs.Path(tokens.toURI()), new Configuration(false));
      token = Handoff.token(Credentials.readTokenStorageFile(tokens, new Configuration(false))).orElseThrow();
    } finally {
      Files.deleteIfExists(tokens.toPath());
    }
    YarnJob job = YarnJob.fromEnvironmentValue(warmUpJob().toEnvironmentValue());
    TaskRef ref = TaskRef.newBuilder().setJob(task.job()).setIndex(0).setContainerId("warm-up").build();
    try (TaskServer master = TaskServer.start(new TaskId("master", 0), new HostPort("127.0.0.1", 0),
        Security.of(token)); ChannelCache channels = new ChannelCache(Security.of(token))) {
      master.addService(new WarmUpMaster());
      return run(GangServiceGrpc.newBlockingStub(channels.get(master.address())), ref, job, token, "127.0.0.1")
          .exitCode();
    }
  }

  /** The warm-up's job: one worker, whose command exits at once. */
  static YarnJob warmUpJob() {
    return new YarnJob("warm-up", "default", GangSpec.workers(1), Map.of(TaskType.WORKER,
        new YarnJob.Resources(128, 1, 0)), Map.of(TaskType.WORKER, "true"), Map.of(), 1, Rerun.CLUSTER_FAILURES, CALL,
        Optional.empty(), List.of(), List.of(), YarnJob.Placement.ANYWHERE);
  }

  /** The warm-up's master: the gang is the one executor that registered, and it goes on. */
  private static final class WarmUpMaster extends GangServiceGrpc.GangServiceImplBase {
    private final AtomicReference<String> registered = new AtomicReference<>();

    @Override
    public void register(RegisterRequest request, StreamObserver<RegisterResponse> response) {
      registered.set(request.getAddress());
      response.onNext(RegisterResponse.getDefaultInstance());
      response.onCompleted();
    }

    @Override
    public void awaitGang(AwaitGangRequest request, StreamObserver<AwaitGangResponse> response) {
      response.onNext(AwaitGangResponse.newBuilder().addAddresses(registered.get()).build());
      response.onCompleted();
    }

    @Override
    public void heartbeat(HeartbeatRequest request, StreamObserver<HeartbeatResponse> response) {
      response.onNext(HeartbeatResponse.newBuilder().setAction(HeartbeatResponse.Action.CONTINUE).build());
      response.onCompleted();
    }

    @Override
    public void exited(ExitedRequest request, StreamObserver<ExitedResponse> response) {
      response.onNext(ExitedResponse.getDefaultInstance());
      response.onCompleted();
    }
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

  private static Ended run(GangServiceGrpc.GangServiceBlockingStub stub, TaskRef ref, YarnJob job, JobToken token,
      String host) throws IOException, InterruptedException {
    TaskId task = GangEndpoint.taskOf(ref);
    int attempt = ref.getAttempt();
    int member = job.gang().member(task);
    TaskType type = TaskType.ofJobName(task.job()).orElseThrow();
    List<HostPort> addresses;
    try (ServerSocket reserved = new ServerSocket()) {
      reserved.setReuseAddress(true);
      reserved.bind(new InetSocketAddress(InetAddress.getByName(host), 0));
      HostPort address = new HostPort(host, reserved.getLocalPort());
      stub.withDeadlineAfter(CALL.toMillis(), TimeUnit.MILLISECONDS)
          .register(RegisterRequest.newBuilder().setTask(ref).setAddress(address.toString()).build());
      log.info("{}: registered at {}{}; waiting for the gang", task, address, startCost());
      addresses = stub.withDeadlineAfter(job.gangTimeout().plus(CALL).toMillis(), TimeUnit.MILLISECONDS)
          .awaitGang(AwaitGangRequest.newBuilder().setTask(ref).build())
          .getAddressesList().stream().map(HostPort::parse).toList();
    } catch (StatusRuntimeException e) {
      log.error("{}: {}", task, e.getStatus().getDescription() == null ? e.getStatus().getCode()
          : e.getStatus().getDescription());
      // an aborted attempt: the master may want the container for the next
      return new Ended(1, e.getStatus().getCode() == Status.Code.ABORTED);
    } // the port is free again: the command binds it next
    Gang gang = job.gang().formed(addresses);
    log.debug("{}: the gang's addresses: {}", task, addresses);
    Path containerDir = Path.of("").toAbsolutePath(); // where YARN put the shipped files
    Path workDir = Files.createTempDirectory(containerDir, "muster-work-");
    Map<String, String> env = new LinkedHashMap<>();
    // Without Kerberos a Hadoop client is whoever HADOOP_USER_NAME (else the OS) says; the container's
    // process may belong to the NodeManager's user, so name the submitting user (Kerberos ignores it).
    Optional.ofNullable(System.getenv(ApplicationConstants.Environment.USER.name()))
        .filter(user -> System.getenv(HADOOP_USER_NAME) == null)
        .ifPresent(user -> env.put(HADOOP_USER_NAME, user));
    env.putAll(job.environment());
    env.putAll(TaskEnvironment.of(gang, member, attempt, gpus(job.resources().get(type).gpus()), workDir,
        job.outputDir(), token));
    TaskEnvironment.putTemporaryDirectory(env, workDir);
    PrintStream out = System.out;
    PrintStream err = System.err;
    AtomicReference<HeartbeatResponse.Action> endedBy = new AtomicReference<>();
    log.info("{}: the gang is formed; starting `{}` (attempt {})", task, job.commands().get(type),
        attempt + 1);
    // The shell traps the preemption signal, which goes to the whole process group: it lives on for
    // its child, the training command, to save, then exits with the child's code (a list's later
    // commands do not run; nor after the SIGTERM that ends an aborted attempt).
    try (TaskProcess process = TaskProcess.start(task.toString(), List.of("/bin/sh", "-c",
        "trap exit " + job.preemption().signal() + "; " + job.commands().get(type)), env, containerDir,
        (stream, line) -> (stream == TaskProcess.Stream.STDOUT ? out : err).println(line), 30, GRACE)) {
      Thread heartbeats = new Thread(() -> heartbeat(stub, ref, task, process, job.preemption().signal(), endedBy),
          "muster-heartbeat-" + task.job() + "-" + task.index());
      heartbeats.setDaemon(true);
      heartbeats.start();
      int code = process.waitFor(Duration.ofDays(365 * 100)).orElseThrow();
      heartbeats.interrupt();
      HeartbeatResponse.Action action = endedBy.get();
      boolean offerContainer = false;
      try {
        offerContainer = stub.withDeadlineAfter(CALL.toMillis(), TimeUnit.MILLISECONDS).exited(ExitedRequest
            .newBuilder().setTask(ref).setExitCode(code).addAllStderrTail(process.stderrTail())
            .setEndedByRequest(action != null).build()).getOfferContainer();
      } catch (StatusRuntimeException e) {
        log.warn("{}: cannot tell the master that the command exited with {}: {}", task, code, e.getStatus());
      }
      if (action == HeartbeatResponse.Action.END) {
        log.info("{}: ended the command: the tasks the job awaits have all finished", task);
        return new Ended(0, false);
      }
      log.info("{}: the command exited with code {}", task, code);
      if (offerContainer) { // the task's private directory goes with the task, not with the container, which lives on
        try {
          ExecutorArchive.deleteTree(workDir);
        } catch (IOException e) {
          log.warn("{}: cannot delete the task's directory {}: {}", task, workDir, e.toString());
        }
      }
      return new Ended(code == 0 && action == null ? 0 : 1, offerContainer);
    }
  }

  /**
   * Until the command exits: ask the master every second; pass a preemption notice on once, as the
   * job's preemption signal; end the command when told, or when the master is lost.
   */
  private static void heartbeat(GangServiceGrpc.GangServiceBlockingStub stub, TaskRef ref, TaskId task,
      TaskProcess process, String preemptionSignal, AtomicReference<HeartbeatResponse.Action> endedBy) {
    Instant lastAnswer = Instant.now();
    boolean noticeSent = false;
    while (!Thread.currentThread().isInterrupted()) {
      try {
        Thread.sleep(HEARTBEAT.toMillis());
        HeartbeatResponse reply = stub.withDeadlineAfter(CALL.toMillis(), TimeUnit.MILLISECONDS)
            .heartbeat(HeartbeatRequest.newBuilder().setTask(ref).build());
        lastAnswer = Instant.now();
        if (reply.getAction() == HeartbeatResponse.Action.PREEMPT) {
          if (!noticeSent) {
            log.warn("{}: {}; sending the command SIG{} to save and leave", task, reply.getReason(), preemptionSignal);
            process.signal(preemptionSignal);
            noticeSent = true;
          }
        } else if (reply.getAction() != HeartbeatResponse.Action.CONTINUE) {
          log.info("{}: the master says {}: {}", task, reply.getAction(), reply.getReason());
          endedBy.set(reply.getAction());
          process.close();
          return;
        }
      } catch (InterruptedException e) {
        return;
      } catch (StatusRuntimeException e) {
        if (e.getStatus().getCode() == Status.Code.FAILED_PRECONDITION) {
          // the master has moved on: this executor was cut off, and the master ended its attempt meanwhile
          log.error("{}: the master ended this attempt ({}); ending the command", task, e.getStatus().getDescription());
          endedBy.set(HeartbeatResponse.Action.ABORT);
          process.close();
          return;
        }
        if (Instant.now().isAfter(lastAnswer.plus(MASTER_LOST))) {
          log.error("{}: lost the ApplicationMaster ({} without an answer: {}); ending the command", task,
              MASTER_LOST, e.getStatus());
          endedBy.set(HeartbeatResponse.Action.ABORT);
          process.close();
          return;
        }
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
