package io.muster.examples;

import io.muster.cluster.ClusterSpec;
import io.muster.cluster.TaskId;
import io.muster.cluster.TfConfig;
import io.muster.rpc.JobToken;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * Runs one of the {@link PsExamples} as a chief, workers and ps tasks, each its own JVM with its
 * own {@code TF_CONFIG} (as hosts would run it), relaying their output prefixed with the task. The
 * chief tells the story; when it prints {@code muster-example: kill worker 1} or {@code
 * muster-example: restart worker 1}, this launcher does it (SIGKILL; a new JVM with the same
 * {@code TF_CONFIG}). The exit code is the chief's.
 */
final class LocalPsJob {

  static final String CONTROL = "muster-example: ";

  /** A task held back at the start, or never started. */
  record Late(TaskId task, Duration delay) {}

  private final ClusterSpec cluster;
  private final String token;
  private final String example;
  private final List<String> args;
  private final PrintStream out;
  private final Map<TaskId, Process> processes = new ConcurrentHashMap<>();
  private final List<Thread> relays = new ArrayList<>();

  private LocalPsJob(ClusterSpec cluster, String example, List<String> args, PrintStream out) {
    this.cluster = cluster;
    this.example = example;
    this.args = args;
    this.out = out;
    this.token = JobToken.random().value();
  }

  /** Runs the example; returns the chief's exit code. A late task with a null delay is never started. */
  static int run(String example, int workers, int ps, List<String> args, Late late, PrintStream out)
      throws Exception {
    List<String> free = LocalTraining.freeAddresses(1 + workers + ps);
    Map<String, List<String>> jobs = new LinkedHashMap<>();
    jobs.put("chief", free.subList(0, 1));
    jobs.put("worker", free.subList(1, 1 + workers));
    jobs.put("ps", free.subList(1 + workers, free.size()));
    LocalPsJob job = new LocalPsJob(ClusterSpec.of(jobs), example, args, out);
    return job.run(late);
  }

  private int run(Late late) throws Exception {
    out.println("cluster: " + cluster);
    try {
      for (TaskId task : cluster.allTasks()) {
        if (late == null || !task.equals(late.task())) {
          start(task);
        }
      }
      if (late != null && late.delay() != null) {
        Thread starter = new Thread(() -> {
          try {
            Thread.sleep(late.delay().toMillis());
            say(late.task() + " starts now, " + late.delay().toSeconds() + " s late");
            start(late.task());
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
        }, "late-start");
        starter.setDaemon(true);
        starter.start();
      }
      Process chief = processes.get(new TaskId("chief", 0));
      if (!chief.waitFor(10, TimeUnit.MINUTES)) {
        say("the chief did not finish within 10 minutes; ending the job");
        return 1;
      }
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      for (Process p : processes.values()) {
        p.waitFor(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
      }
      for (Thread relay : relays) {
        relay.join(5000);
      }
      return chief.exitValue();
    } finally {
      processes.values().forEach(Process::destroyForcibly);
    }
  }

  private void start(TaskId task) {
    List<String> command = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", System.getProperty("java.class.path"),
        PsExamples.class.getName(), example));
    command.addAll(args);
    ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
    builder.environment().put(TfConfig.ENV, TfConfig.of(cluster, task).toJson());
    builder.environment().put(JobToken.ENV, token);
    builder.environment().putIfAbsent("MUSTER_LOG_LEVEL", "warn");
    try {
      Process process = builder.start();
      processes.put(task, process);
      Thread relay = new Thread(() -> relay(task, process), "relay-" + task.job() + "-" + task.index());
      relay.setDaemon(true);
      relays.add(relay);
      relay.start();
    } catch (IOException e) {
      throw new java.io.UncheckedIOException("cannot start " + task, e);
    }
  }

  /** Copies a task's output with its prefix, and acts on the chief's control lines. */
  private void relay(TaskId task, Process process) {
    String prefix = "[" + task + "] ";
    try (BufferedReader in = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
      for (String line = in.readLine(); line != null; line = in.readLine()) {
        if (line.startsWith(CONTROL)) {
          control(line.substring(CONTROL.length()).trim());
        } else {
          synchronized (out) {
            out.println(prefix + line);
          }
        }
      }
    } catch (IOException e) {
      say(task + "'s output was lost: " + e.getMessage());
    }
  }

  private void control(String command) {
    String[] words = command.split(" ");
    TaskId task = new TaskId(words[1], Integer.parseInt(words[2]));
    if (words[0].equals("kill")) {
      Process p = processes.get(task);
      p.destroyForcibly();
      try {
        p.waitFor(10, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      say(task + " killed (SIGKILL)");
    } else if (words[0].equals("restart")) {
      say(task + " started again with the same TF_CONFIG");
      start(task);
    }
  }

  private void say(String line) {
    synchronized (out) {
      out.println("» " + line);
    }
  }

}
