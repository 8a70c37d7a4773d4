package io.muster.launch;

import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.cluster.TaskType;
import io.muster.internal.Durations;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Collectors;

/**
 * One attempt of the whole gang, as its launcher sees it: the one implementation of an attempt's
 * life that the Spark driver and the YARN ApplicationMaster both drive. Events come in (a member
 * placed, joined, heard from, exited or lost; a preemption notice; the clock's {@link #tick}),
 * and out come what each member is to do ({@link #instruction}) and how the attempt ended
 * ({@link #outcome}), with the words the launchers report it in ({@link Attempts}).
 *
 * <p><b>The verdict.</b> The attempt succeeds once every tracked task ({@link GangSpec}) has exited
 * 0; the untracked ones still running are then told to end. It fails at the first failure, which
 * no later one changes, with two exceptions. A failure that may be the symptom of another (a
 * command's own exit code, {@link Rerun#isCommandsOwn}, or a member that failed because the gang
 * did) waits {@link Rerun#CAUSE_WINDOW} for the cluster's failure of another member that caused it,
 * which then stands instead; and a member that failed after another has failed is no cause. A
 * member the launcher has not heard from for {@link Heartbeats#MEMBER_SILENT} (or
 * {@link Heartbeats#MEMBER_SUSPECT} once another member has failed) while it runs is lost with its
 * host, and so is the attempt: a host that loses power or its link resets nothing.
 *
 * <p><b>Which failures count.</b> The outcome's {@link Kind}: the command's {@link Kind#OWN} failure
 * (a re-run would repeat it); the {@link Kind#CLUSTER}'s failure (a task killed or lost, a command
 * asking for a re-run); a member {@link Kind#LOST} to the cluster (its host silent, its container
 * taken away), which does not count against the job's attempts; a {@link Kind#PREEMPTED} gang,
 * which does not count either; and a gang {@link Kind#NOT_FORMED}, which would not form the next
 * time either. {@link Attempts} applies the counting.
 *
 * <p><b>Preemption.</b> A notice that a member is going away, while the gang runs and nothing has
 * failed, tells every member to save and leave ({@link Instruction.Action#PREEMPT}); from then on
 * the attempt ends as preempted: at once when a member fails otherwise than by saving, when every
 * tracked task has exited, or {@link OnPreemption#SAVED_PEERS_WAIT} after the first one saved (a
 * TensorFlow chief leaves after its workers). A notice before the gang formed ends the attempt at once.
 *
 * <p>Thread-safe; time is the clock's, so that tests run the 10 s silences in no time.
 * Listeners ({@link #onChange}) hear of every change to what members are told, outside the lock.
 */
public final class Attempt {

  /** How long past the first saved exit the others of a preempted gang have to save and exit by themselves. */
  private static final Duration SAVED_PEERS_WAIT = OnPreemption.SAVED_PEERS_WAIT;

  /**
   * Where a member runs, as its launcher names it.
   *
   * @param host the host, as the cluster names it
   * @param where what runs it there: {@code container container_…_02}, {@code executor 3}
   * @param logs where its logs are shown, if anywhere
   */
  public record Placement(String host, String where, Optional<String> logs) {
    public Placement {
      if (host == null || host.isBlank() || where == null || where.isBlank()) {
        throw new IllegalArgumentException("a placement names a host and what runs the task there, was " + host
            + ", " + where);
      }
    }

    @Override
    public String toString() {
      return host + " (" + where + ")";
    }
  }

  /**
   * How a member ended, as it reports it.
   *
   * @param code its command's exit code; a train function's 0, 1 (its own failure), {@link Rerun#EX_TEMPFAIL}
   *     (re-run it) or the saved exit code
   * @param afterGangFailure it failed because the gang did: a peer's failure reached it, or it was told to end
   * @param story how it ended, in words that follow its name ({@code exited with code 3; …}); empty for 0
   * @param stderrTail the last lines of its command's stderr, for the status page
   */
  public record Exit(int code, boolean afterGangFailure, String story, List<String> stderrTail) {
    public Exit {
      stderrTail = List.copyOf(stderrTail);
      story = story == null || story.isBlank() ? code == 0 ? "" : TaskProcess.exitStory(code, stderrTail) : story;
    }

    /** A command's exit, told as {@link TaskProcess#exitStory}. */
    public static Exit ofCommand(int code, List<String> stderrTail, boolean afterGangFailure) {
      return new Exit(code, afterGangFailure, "", stderrTail);
    }
  }

  /** What a member is to do now. */
  public record Instruction(Action action, String reason) {
    public enum Action { CONTINUE, END, ABORT, PREEMPT }

    static final Instruction CONTINUE = new Instruction(Action.CONTINUE, "");
  }

  /** How an attempt ended, for the counting ({@link Attempts}). */
  public enum Kind { OWN, CLUSTER, LOST, PREEMPTED, NOT_FORMED }

  /** The attempt's outcome, once it has one. */
  public sealed interface Outcome permits Succeeded, Failed {}

  public record Succeeded() implements Outcome {}

  /**
   * @param report what happened, in words: the failed member, its host and its story
   * @param lostTo for {@link Kind#LOST} and {@link Kind#PREEMPTED}: why the attempt does not count
   * @param silent the members whose silence ended the attempt, for the launcher to deal with their hosts
   * @param everySaved for a preempted gang: every tracked member saved (or finished), or none had started
   */
  public record Failed(Kind kind, String report, Optional<String> lostTo, List<Silent> silent, boolean everySaved)
      implements Outcome {}

  /** A member silent for {@code silence}, and where it runs. */
  public record Silent(TaskId task, Placement placement, Duration silence) {}

  /** Why a member failed, for the verdict: the weakest cause first. */
  private enum Cause {
    /** It failed because the gang did: it is no one's cause. */
    AFTER_GANG,
    /** Its own exit code: perhaps the symptom of a cluster's failure heard a moment later. */
    OWN,
    /** The cluster's: killed, lost, or asking for a re-run. */
    CLUSTER,
    /** Lost to the cluster: its container taken away. */
    LOST;

    boolean maybeSymptom() {
      return this == AFTER_GANG || this == OWN;
    }
  }

  /** The first failure: the verdict while the attempt runs, and what its report says. */
  private record Failure(TaskId task, Cause cause, String report, Instant at) {}

  /** What the launcher knows of one member. */
  private static final class Member {
    final TaskId task;
    Placement placement;
    final Instant placedAt;
    HostPort address;
    Instant joinedAt;
    Instant lastHeard;
    Exit exit;
    Instant exitedAt;
    boolean gone;
    /** Its exit is the launcher's guess: its link ended before it said how it ended. */
    boolean linkLost;

    Member(TaskId task, Placement placement, Instant placedAt) {
      this.task = task;
      this.placement = placement;
      this.placedAt = placedAt;
    }

    String named() {
      return task + (placement == null ? "" : " on " + placement);
    }

    boolean running() {
      return joinedAt != null && exit == null && !gone;
    }
  }

  private final int number;
  private final GangSpec gang;
  private final Duration gangTimeout;
  private final Instant deadline;
  private final int savedExitCode;
  private final Clock clock;
  private final Map<TaskId, Member> members = new LinkedHashMap<>();
  private final List<Runnable> listeners = new CopyOnWriteArrayList<>();
  private Instant formedAt;
  private Instant lastTick;
  /** The preemption notice the members are told, once there is one. */
  private String notice;
  /** Whether the notice came while the gang ran and nothing had failed: the attempt ends as preempted. */
  private boolean preempting;
  /** When the first member saved for the notice. */
  private Instant firstSaved;
  private Failure failure;
  /** Once the attempt has failed: how, and what the members are told. */
  private Kind endedAs;
  private String endReason;
  /** Whether the attempt ended for its first failure, whose report is the outcome's. */
  private boolean endedForFailure;
  private Optional<String> lostTo = Optional.empty();
  /** The members whose silence ended the attempt, what the launcher found out about each, and what it adds. */
  private List<Silent> silent = List.of();
  private Map<TaskId, String> silenceDetail = Map.of();
  private String silenceMore = "";
  /** The failure the silence came before: the silence is taken for its cause. */
  private String afterSilence = "";
  private boolean formationOverdue;

  /**
   * @param number the attempt's number, from 0
   * @param gangTimeout how long the gang may take to form, from now
   * @param savedExitCode the exit code by which a member says it saved for a preemption
   */
  public Attempt(int number, GangSpec gang, Duration gangTimeout, int savedExitCode, Clock clock) {
    this.number = number;
    this.gang = gang;
    this.clock = clock;
    this.gangTimeout = gangTimeout;
    this.deadline = clock.instant().plus(gangTimeout);
    this.lastTick = clock.instant();
    this.savedExitCode = savedExitCode;
  }

  public int number() {
    return number;
  }

  /** {@code attempt 3}: the attempt numbered {@code number} from 0, as people count it. */
  public static String named(int number) {
    return "attempt " + (number + 1);
  }

  /** {@code attempt 3}. */
  @Override
  public String toString() {
    return named(number);
  }

  public GangSpec gang() {
    return gang;
  }

  /** Runs {@code listener} after every change to what the members are told (not after a heartbeat). */
  public void onChange(Runnable listener) {
    listeners.add(listener);
  }

  // ---- placement (a launcher that allocates containers)

  /** Gives a newly allocated container the lowest index of its type no member has; empty when the type is complete. */
  public Optional<TaskId> assign(TaskType type, Placement placement) {
    synchronized (this) {
      for (int index = 0; index < gang.count(type); index++) {
        TaskId task = TaskId.of(type, index);
        if (!members.containsKey(task)) {
          members.put(task, new Member(task, placement, clock.instant()));
          return Optional.of(task);
        }
      }
    }
    return Optional.empty();
  }

  /** Places {@code task} where it ran in the previous attempt (a container kept). */
  public synchronized void keep(TaskId task, Placement placement) {
    if (members.containsKey(task)) {
      throw new IllegalArgumentException(task + " is already placed in " + this);
    }
    gang.member(task);
    members.put(task, new Member(task, placement, clock.instant()));
  }

  /** How many members of {@code type} have a place. */
  public synchronized int placed(TaskType type) {
    return (int) members.keySet().stream().filter(task -> task.is(type)).count();
  }

  // ---- the members' events

  /**
   * {@code task} joins at {@code address}, running at {@code placement} (a member the launcher
   * placed must come from there).
   *
   * @throws IllegalArgumentException for a task outside the gang
   * @throws IllegalStateException when it comes from elsewhere than its place, or has joined already
   */
  public void join(TaskId task, HostPort address, Placement placement) {
    synchronized (this) {
      gang.member(task);
      Member m = members.get(task);
      if (m != null && m.placement != null && !m.placement.where().equals(placement.where())) {
        throw new IllegalStateException(task + " from " + placement.where() + " is not " + this + "'s: it runs in "
            + m.placement.where());
      }
      if (m != null && m.joinedAt != null) {
        throw new IllegalStateException(task + " has already joined " + this);
      }
      if (m == null) {
        m = new Member(task, placement, clock.instant());
        members.put(task, m);
      }
      m.address = address;
      m.joinedAt = clock.instant();
      m.lastHeard = m.joinedAt;
      if (formedAt == null && formed()) {
        formedAt = m.joinedAt;
      }
    }
    changed();
  }

  /** The member said something: it is alive. */
  public synchronized void heard(TaskId task) {
    Member m = members.get(task);
    if (m != null) {
      m.lastHeard = clock.instant();
    }
  }

  /** The member reports how it ended; a second report of the same member is ignored. */
  public void exited(TaskId task, Exit exit) {
    synchronized (this) {
      Member m = member(task);
      m.lastHeard = clock.instant();
      if (m.exit != null) {
        return;
      }
      m.exit = exit;
      m.exitedAt = clock.instant();
      if (exit.code() != 0) {
        failed(m, exit.afterGangFailure() ? Cause.AFTER_GANG : Rerun.isCommandsOwn(exit.code()) ? Cause.OWN
            : Cause.CLUSTER);
      }
      evaluate();
    }
    changed();
  }

  /**
   * The member's link to the launcher ended before it reported its exit: its process failed or was
   * killed. The cluster's failure (unless the attempt had ended, or told it to end).
   */
  public void linkLost(TaskId task) {
    synchronized (this) {
      Member m = members.get(task);
      if (m == null || m.exit != null || m.gone || endedAs != null || succeeded()) {
        return;
      }
      m.gone = true;
      m.linkLost = true;
      m.exit = new Exit(1, false, "ended before it reported its exit (its process failed or was killed)", List.of());
      m.exitedAt = clock.instant();
      failed(m, Cause.CLUSTER);
      evaluate();
    }
    changed();
  }

  /**
   * The cluster says the member is gone (YARN: its container completed), with {@code status} and
   * {@code diagnostics}; {@code takenAway} when the cluster took it (preempted, its node lost), which
   * does not count against the job. A member that had not reported its exit failed with the status.
   */
  public void gone(TaskId task, int status, String diagnostics, boolean takenAway) {
    synchronized (this) {
      Member m = members.get(task);
      if (m == null) {
        return;
      }
      m.gone = true;
      Exit said = Exit.ofCommand(status == 0 ? 1 : status, diagnostics.isBlank() ? List.of()
          : List.of("the container ended (exit status " + status + "): " + diagnostics.strip()), false);
      Cause cause = takenAway ? Cause.LOST : Rerun.isCommandsOwn(said.code()) ? Cause.OWN : Cause.CLUSTER;
      if (m.exit == null) {
        m.exit = said;
        m.exitedAt = clock.instant();
        failed(m, cause);
      } else if (m.linkLost) { // what the cluster says of it is more than its lost link did
        m.exit = said;
        m.linkLost = false;
        if (failure != null && failure.task().equals(task)) {
          failure = new Failure(task, cause == Cause.LOST ? cause : failure.cause(), m.named() + " " + said.story(),
              failure.at());
          if (endedAs == Kind.CLUSTER && cause == Cause.LOST) {
            endedAs = Kind.LOST;
            lostTo = Optional.of("the cluster took its container away");
          }
        }
      }
      evaluate();
    }
    changed();
  }

  /**
   * A notice that members are going away ({@code detail} for each: its container and host, its
   * executor's words). The first one while the attempt runs is told to every member; returns it.
   */
  public Optional<String> notice(Map<TaskId, String> detail) {
    String told;
    synchronized (this) {
      if (notice != null || endedAs != null || succeeded()) {
        return Optional.empty();
      }
      notice = "preemption notice for " + detail.entrySet().stream().map(e -> e.getKey() + " (" + e.getValue() + ")")
          .collect(Collectors.joining(", "));
      told = notice;
      if (formedAt == null) {
        end(Kind.PREEMPTED, notice + " before the gang formed; ending the attempt");
        lostTo = Optional.of("preempted");
      } else if (failure == null) {
        preempting = true;
      }
      evaluate();
    }
    changed();
    return Optional.of(told);
  }

  // ---- the launcher's events

  /** Judges the clock: members' silences, the cause window, the saved peers' wait, the gang's deadline. */
  public void tick() {
    boolean ended;
    synchronized (this) {
      Instant now = clock.instant();
      if (Duration.between(lastTick, now).compareTo(Heartbeats.EVERY.multipliedBy(3)) > 0) {
        // the launcher itself did not run (a long pause): what its members sent meanwhile was not read
        members.values().forEach(m -> m.lastHeard = m.lastHeard == null ? null : now);
      }
      lastTick = now;
      Kind before = endedAs;
      evaluate();
      if (formedAt == null && endedAs == null && !now.isBefore(deadline)) {
        formationOverdue = true;
      }
      ended = before != endedAs;
    }
    if (ended) {
      changed();
    }
  }

  /** Whether the gang's deadline passed before it formed: the launcher finds out why and calls {@link #notFormed}. */
  public synchronized boolean formationOverdue() {
    return formationOverdue && endedAs == null;
  }

  /** The members that have not joined, in member order. */
  public synchronized List<TaskId> missing() {
    return gang.tasks().stream().filter(t -> !members.containsKey(t) || members.get(t).joinedAt == null).toList();
  }

  /**
   * The gang did not form in time: {@code explanation} says what was missing and why;
   * {@code allocated} when every missing member had a place (its host failed: a re-run may find
   * others), not when the cluster gave it none (it would not fit the next time either).
   */
  public void notFormed(String explanation, boolean allocated) {
    synchronized (this) {
      if (endedAs != null) {
        return;
      }
      end(allocated ? Kind.CLUSTER : Kind.NOT_FORMED, "the gang was not formed within the gang timeout of "
          + Durations.words(gangTimeout) + ": " + explanation);
    }
    changed();
  }

  /** The launcher ends the attempt for a failure of its own ({@code kind}), said in {@code reason}. */
  public void abort(Kind kind, String reason) {
    synchronized (this) {
      if (endedAs != null || succeeded()) {
        return;
      }
      end(kind, reason);
    }
    changed();
  }

  /**
   * The launcher can wait no longer (its job over the gang has ended): a failure waiting for its
   * cause stands now; without any, the attempt failed for {@code otherwise}, the cluster's failure.
   */
  public void settle(String otherwise) {
    synchronized (this) {
      if (endedAs != null || succeeded()) {
        return;
      }
      if (preempting) {
        endPreempted();
      } else if (failure != null) {
        endForFailure();
      } else {
        end(Kind.CLUSTER, otherwise);
      }
    }
    changed();
  }

  /**
   * Adds what the launcher found out about the members whose silence ended the attempt:
   * {@code detail} for each (what its host answers), {@code more} after them, and why the attempt
   * does not count.
   */
  public synchronized void explainSilence(Map<TaskId, String> detail, String more, String why) {
    if (endedAs == Kind.LOST && !silent.isEmpty()) {
      silenceDetail = Map.copyOf(detail);
      silenceMore = more;
      lostTo = Optional.of(why);
    }
  }

  // ---- what comes out

  /** The members' addresses in member order, once every member has joined. */
  public synchronized Optional<List<HostPort>> addresses() {
    return formed() ? Optional.of(gang.tasks().stream().map(t -> members.get(t).address).toList()) : Optional.empty();
  }

  public synchronized boolean isFormed() {
    return formedAt != null;
  }

  /** What {@code task} is to do now. */
  public synchronized Instruction instruction(TaskId task) {
    if (endedAs != null) {
      return new Instruction(Instruction.Action.ABORT, endReason);
    }
    if (succeeded()) {
      Member m = members.get(task);
      return !gang.isTracked(task) && (m == null || m.exit == null)
          ? new Instruction(Instruction.Action.END, "the tasks the job awaits have all finished") : Instruction.CONTINUE;
    }
    return preempting || notice != null && failure == null ? new Instruction(Instruction.Action.PREEMPT, notice)
        : Instruction.CONTINUE;
  }

  /** Whether the attempt has failed (or is about to, once a cause window or a saved peers' wait has passed). */
  public synchronized boolean failed() {
    return endedAs != null || failure != null;
  }

  /** Whether the attempt has ended: it failed, or every tracked task succeeded. */
  public synchronized boolean ended() {
    return endedAs != null || succeeded();
  }

  /** How the attempt ended; empty while it runs. The report is told with what is known now. */
  public synchronized Optional<Outcome> outcome() {
    if (endedAs == null) {
      return succeeded() ? Optional.of(new Succeeded()) : Optional.empty();
    }
    return Optional.of(new Failed(endedAs, report(), lostTo, silent, endedAs == Kind.PREEMPTED && (formedAt == null
        || gang.tasks().stream().filter(gang::isTracked).allMatch(t -> saved(members.get(t))))));
  }

  /** The members of a formed gang that have not been heard from for {@code limit} or longer while they run. */
  public synchronized List<Silent> silentFor(Duration limit) {
    if (formedAt == null) {
      return List.of();
    }
    Instant now = clock.instant();
    List<Silent> found = new ArrayList<>();
    for (Member m : members.values()) {
      Duration silence = m.running() ? Duration.between(m.lastHeard.isAfter(formedAt) ? m.lastHeard : formedAt, now)
          : Duration.ZERO;
      if (silence.compareTo(limit) >= 0) {
        found.add(new Silent(m.task, m.placement, silence));
      }
    }
    return found;
  }

  /** Every member for a status page, in member order; the {@code TF_CONFIG} each got once the gang formed. */
  public synchronized List<Map<String, Object>> describeTasks() {
    Optional<Gang> formed = formed() ? Optional.of(gang.formed(addresses().orElseThrow())) : Optional.empty();
    List<Map<String, Object>> tasks = new ArrayList<>();
    for (TaskId task : gang.tasks()) {
      Member m = members.get(task);
      Map<String, Object> row = new LinkedHashMap<>();
      row.put("task", task.toString());
      row.put("type", task.job());
      row.put("index", task.index());
      row.put("host", m == null || m.placement == null ? null : m.placement.host());
      row.put("where", m == null || m.placement == null ? null : m.placement.where());
      row.put("logs", m == null || m.placement == null ? null : m.placement.logs().orElse(null));
      row.put("state", m == null ? "waiting for a place" : state(m));
      row.put("exit_code", m == null || m.exit == null ? null : m.exit.code());
      row.put("placed", m == null ? null : m.placedAt.toString());
      row.put("joined", m == null || m.joinedAt == null ? null : m.joinedAt.toString());
      row.put("exited", m == null || m.exitedAt == null ? null : m.exitedAt.toString());
      row.put("tf_config", formed.map(g -> g.tfConfig(gang.member(task)).toJson()).orElse(null));
      tasks.add(row);
    }
    return tasks;
  }

  /** The preemption notice, while the members are told to save for it. */
  public synchronized Optional<String> preemption() {
    return Optional.ofNullable(endedAs == null ? notice : null);
  }

  // ---- the rules

  private String state(Member m) {
    return m.exit != null ? "exited " + m.exit.code() : m.gone ? "gone" : m.joinedAt != null ? "running" : "starting";
  }

  private boolean formed() {
    return members.size() == gang.size() && members.values().stream().allMatch(m -> m.joinedAt != null);
  }

  private boolean succeeded() {
    return failure == null && endedAs == null && gang.tasks().stream().filter(gang::isTracked)
        .allMatch(t -> members.containsKey(t) && members.get(t).exit != null && members.get(t).exit.code() == 0);
  }

  /** {@code m} failed with {@code cause}: the first failure, or the cause of a failure that may be its symptom. */
  private void failed(Member m, Cause cause) {
    if (endedAs != null || succeeded()) {
      return;
    }
    String report = m.named() + " " + m.exit.story();
    if (failure == null || failure.cause().maybeSymptom() && cause.compareTo(failure.cause()) > 0
        && !failure.task().equals(m.task) && clock.instant().isBefore(failure.at().plus(Rerun.CAUSE_WINDOW))) {
      failure = new Failure(m.task, cause, report, failure == null ? clock.instant() : failure.at());
    }
  }

  private void evaluate() {
    if (endedAs != null || succeeded()) {
      return;
    }
    Instant now = clock.instant();
    List<Silent> quiet = silentFor(failure == null ? Heartbeats.MEMBER_SILENT : Heartbeats.MEMBER_SUSPECT);
    if (!quiet.isEmpty()) {
      silent = quiet;
      afterSilence = failure == null ? "" : "; after it, " + failureReport();
      end(preempting ? Kind.PREEMPTED : Kind.LOST, silenceAccounts() + afterSilence);
      lostTo = Optional.of(preempting ? "preempted" : "a member went silent");
      return;
    }
    if (preempting) {
      evaluatePreemption(now);
    } else if (failure != null && !(failure.cause().maybeSymptom()
        && now.isBefore(failure.at().plus(Rerun.CAUSE_WINDOW)))) {
      endForFailure();
    }
  }

  private void endForFailure() {
    endedForFailure = true;
    end(switch (failure.cause()) {
      case OWN -> Kind.OWN;
      case AFTER_GANG, CLUSTER -> Kind.CLUSTER;
      case LOST -> Kind.LOST;
    }, failureReport());
    if (failure.cause() == Cause.LOST) {
      lostTo = Optional.of("the cluster took its container away");
    }
  }

  private String silenceAccounts() {
    return silent.stream().map(s -> s.task() + " on " + s.placement() + " went silent: no word from it for "
        + s.silence().toSeconds() + " s" + (silenceDetail.containsKey(s.task()) ? "; " + silenceDetail.get(s.task())
        : "")).collect(Collectors.joining("; ")) + silenceMore;
  }

  /** After a notice: ends the attempt as preempted once the members have left, or one has failed otherwise. */
  private void evaluatePreemption(Instant now) {
    List<Member> tracked = members.values().stream().filter(m -> gang.isTracked(m.task)).toList();
    boolean failedOtherwise = members.values().stream().anyMatch(m -> m.exit != null && m.exit.code() != 0
        && m.exit.code() != savedExitCode && gang.isTracked(m.task));
    if (firstSaved == null && tracked.stream().anyMatch(m -> m.exit != null && m.exit.code() == savedExitCode)) {
      firstSaved = now;
    }
    boolean allLeft = tracked.size() == gang.tasks().stream().filter(gang::isTracked).count()
        && tracked.stream().allMatch(m -> m.exit != null || m.gone);
    if (failedOtherwise || allLeft || firstSaved != null && !now.isBefore(firstSaved.plus(SAVED_PEERS_WAIT))) {
      endPreempted();
    }
  }

  private void endPreempted() {
    Member first = members.values().stream().filter(m -> m.exit != null && m.exit.code() != 0)
        .min((a, b) -> a.exitedAt.compareTo(b.exitedAt)).orElse(null);
    end(Kind.PREEMPTED, notice + (first == null ? "" : "; " + first.task + " exited with code " + first.exit.code()
        + (first.exit.code() == savedExitCode ? " (saved)" : "")) + "; the attempt ends");
    lostTo = Optional.of("preempted");
  }

  private void end(Kind kind, String reason) {
    endedAs = kind;
    endReason = reason;
  }

  private String failureReport() {
    return failure == null ? "" : failure.report();
  }

  /** The outcome's report: the ending's reason; for a preempted gang that ran, who saved and who did not. */
  private String report() {
    if (endedAs == Kind.PREEMPTED && formedAt != null) {
      return preemptionReport();
    }
    return endedAs == Kind.LOST && !silent.isEmpty() ? silenceAccounts() + afterSilence
        : endedForFailure ? failureReport() : endReason;
  }

  /** The notice, and how each tracked member answered it: saved (or finished), or not saved and how. */
  private String preemptionReport() {
    List<String> saved = new ArrayList<>();
    List<String> notSaved = new ArrayList<>();
    for (TaskId task : gang.tasks()) {
      Member m = members.get(task);
      Exit exit = m == null ? null : m.exit;
      if (saved(m)) {
        saved.add(task.toString());
      } else if (gang.isTracked(task)) {
        notSaved.add(task + (exit == null ? " (still running)" : " (" + exit.story().replace("\n  ", " | ") + ")"));
      }
    }
    return notice + "; " + (notSaved.isEmpty() ? "every task saved (exit code " + savedExitCode + ")"
        : (saved.isEmpty() ? "" : "saved by " + String.join(", ", saved) + "; ") + "not saved by "
            + String.join(", ", notSaved) + ": the next attempt resumes from the last backup");
  }

  private boolean saved(Member m) {
    return m != null && m.exit != null && (m.exit.code() == savedExitCode || m.exit.code() == 0);
  }

  private Member member(TaskId task) {
    Member m = members.get(task);
    if (m == null) {
      gang.member(task); // a task outside the gang is a launcher's bug: fail loudly
      throw new IllegalStateException(task + " has no place in " + this);
    }
    return m;
  }

  private void changed() {
    listeners.forEach(Runnable::run);
  }
}
