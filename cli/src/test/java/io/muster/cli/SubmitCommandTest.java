package io.muster.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.TaskType;
import io.muster.launch.OnPreemption;
import io.muster.launch.Rerun;
import io.muster.yarn.YarnJob;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/** {@code muster submit}'s options, checked before anything talks to YARN. */
class SubmitCommandTest {

  private static YarnJob parse(String... args) {
    return SubmitCommand.parse(List.of(args), List.of("/opt/muster/lib/a.jar"));
  }

  @Test
  void aParameterServerJobFromItsOptions() {
    YarnJob job = parse("--name", "ps-job", "--queue", "ml", "--chief-instances", "1", "--worker-instances", "2",
        "--ps-instances", "1", "--worker-memory", "2g", "--ps-memory", "512m", "--worker-vcores", "2",
        "--worker-gpus", "1", "--command", "python3 train.py", "--ps-command", "python3 serve.py",
        "--env", "A=1", "--env", "B=x=y", "--max-attempts", "3", "--rerun", "any-failure", "--gang-timeout", "90s",
        "--output-dir", "hdfs:///o", "--preemption-signal", "SIGUSR1", "--preemption-exit-code", "43");
    assertEquals("ps-job", job.name());
    assertEquals(new OnPreemption("USR1", 43), job.preemption());
    assertEquals("ml", job.queue());
    assertEquals("1 chief, 2 workers, 1 ps (untracked: worker, ps)", job.gang().toString());
    assertEquals(new YarnJob.Resources(2048, 2, 1), job.resources().get(TaskType.WORKER));
    assertEquals(new YarnJob.Resources(512, 1, 0), job.resources().get(TaskType.PS));
    assertEquals(new YarnJob.Resources(1024, 1, 0), job.resources().get(TaskType.CHIEF));
    assertEquals(Map.of(TaskType.CHIEF, "python3 train.py", TaskType.WORKER, "python3 train.py", TaskType.PS,
        "python3 serve.py"), job.commands());
    assertEquals(Map.of("A", "1", "B", "x=y"), job.environment());
    assertEquals(3, job.maxAttempts());
    assertEquals(Rerun.ANY_FAILURE, job.rerun());
    assertEquals(Duration.ofSeconds(90), job.gangTimeout());
    assertEquals(Optional.of("hdfs:///o"), job.outputDir());
    assertEquals(job, YarnJob.fromEnvironmentValue(job.toEnvironmentValue()), "the job reaches the master whole");
  }

  @Test
  void aConfFileGivesOptionsWhichTheCommandLineOverrides(@org.junit.jupiter.api.io.TempDir java.nio.file.Path tmp)
      throws Exception {
    java.nio.file.Path conf = java.nio.file.Files.writeString(tmp.resolve("job.properties"), String.join("\n",
        "# a job's settings", "queue = ml", "worker-instances = 3", "worker-memory = 2g", "command = python3 train.py",
        "env.KERAS_BACKEND = tensorflow", "node-label = gpu", "app-timeout = 12h", ""));
    YarnJob job = parse("--conf", conf.toString(), "--worker-instances", "2", "--env", "A=1");
    assertEquals("ml", job.queue());
    assertEquals(2, job.gang().workers(), "the command line wins");
    assertEquals(2048, job.resources().get(TaskType.WORKER).memoryMb());
    assertEquals(Map.of("KERAS_BACKEND", "tensorflow", "A", "1"), job.environment());
    assertEquals(new YarnJob.Placement(Optional.of("gpu"), Optional.of(Duration.ofHours(12))), job.placement());
    assertEquals(job, YarnJob.fromEnvironmentValue(job.toEnvironmentValue()));
  }

  /** A conf file's bad setting is one line naming the file and the line, exit 2. */
  @Test
  void aConfFilesBadLineIsNamedByFileAndLine(@org.junit.jupiter.api.io.TempDir java.nio.file.Path tmp) throws Exception {
    Map<String, String> cases = Map.of(
        "# settings\nqueue = ml\nthis is wrong\n",
        "line 3: 'this' is not a setting; the settings are the options without their -- (worker-instances = 2, "
            + "command = python train.py), env.NAME = VALUE and local = true",
        "command = true\n\nworker-instances = many\n", "line 3: --worker-instances must be an integer >= 0, was 'many'",
        "command: true\n  gang-timeout 0s\n",
        "line 2: --gang-timeout must be a positive duration such as 500ms, 60s, 5m or 1h; was '0s'",
        "command = true\nconf = other.properties\n", "line 2: a configuration file cannot name another (conf = "
            + "other.properties)");
    for (Map.Entry<String, String> c : cases.entrySet()) {
      java.nio.file.Path conf = java.nio.file.Files.writeString(tmp.resolve("job.properties"), c.getKey());
      ByteArrayOutputStream err = new ByteArrayOutputStream();
      int code = Muster.run(List.of("submit", "--conf", conf.toString()), Map.of(),
          new PrintStream(new ByteArrayOutputStream(), true), new PrintStream(err, true));
      assertEquals(2, code, c.getKey());
      assertEquals("muster submit: --conf " + conf + " " + c.getValue() + "\n", err.toString(StandardCharsets.UTF_8));
    }
  }

  @Test
  void anArchiveThatIsNotOneIsRefusedBeforeAnythingIsStaged(@org.junit.jupiter.api.io.TempDir java.nio.file.Path tmp)
      throws Exception {
    java.nio.file.Path text = java.nio.file.Files.writeString(tmp.resolve("env.zip"), "not a zip\n");
    java.nio.file.Path plain = java.nio.file.Files.writeString(tmp.resolve("env.txt"), "a file\n");
    java.nio.file.Path zip = tmp.resolve("ok.zip");
    try (var out = new java.util.zip.ZipOutputStream(java.nio.file.Files.newOutputStream(zip))) {
      out.putNextEntry(new java.util.zip.ZipEntry("a.txt"));
      out.write('a');
    }
    Map<java.nio.file.Path, String> cases = Map.of(
        text, "--archives: " + text + " is named as an archive but is not a zip archive; give the archive itself",
        plain, "--archives: " + plain + " is not named as an archive YARN unpacks (.zip, .jar, .tar, .tar.gz or .tgz);"
            + " ship it with --files instead");
    for (Map.Entry<java.nio.file.Path, String> c : cases.entrySet()) {
      ByteArrayOutputStream err = new ByteArrayOutputStream();
      int code = Muster.run(List.of("submit", "--command", "true", "--archives", c.getKey().toString()), Map.of(),
          new PrintStream(new ByteArrayOutputStream(), true), new PrintStream(err, true));
      assertEquals(2, code, err.toString(StandardCharsets.UTF_8));
      assertEquals("muster submit: " + c.getValue() + "\n", err.toString(StandardCharsets.UTF_8));
    }
    assertEquals(1, parse("--command", "true", "--archives", zip + "#env").shipped().size(), "a real zip is taken");
  }

  @Test
  void yarnLocalRefusesADirectoryItCannotWriteBeforeStarting(@org.junit.jupiter.api.io.TempDir java.nio.file.Path tmp)
      throws Exception {
    java.nio.file.Path file = java.nio.file.Files.writeString(tmp.resolve("a-file"), "x");
    Map<String, String> cases = Map.of(
        "/proc/muster-yarn-local", "--dir /proc/muster-yarn-local is not a directory the cluster can write to (",
        file.resolve("sub").toString(), "--dir " + file.resolve("sub") + " is not a directory the cluster can write to (");
    for (Map.Entry<String, String> c : cases.entrySet()) {
      ByteArrayOutputStream err = new ByteArrayOutputStream();
      int code = Muster.run(List.of("yarn-local", "--dir", c.getKey()), Map.of(),
          new PrintStream(new ByteArrayOutputStream(), true), new PrintStream(err, true));
      String said = err.toString(StandardCharsets.UTF_8);
      assertEquals(2, code, said);
      assertTrue(said.startsWith("muster yarn-local: " + c.getValue()) && said.endsWith("); give one you can write\n")
          && said.lines().count() == 1, said);
    }
  }

  @Test
  void defaultsAreOneWorkerOfOneGigabyteAndTheDefaultQueue() {
    YarnJob job = parse("--command", "true");
    assertEquals("1 worker", job.gang().toString());
    assertEquals("default", job.queue());
    assertEquals(Duration.ofMinutes(10), job.gangTimeout());
    assertEquals(1, job.maxAttempts());
    assertEquals(Rerun.CLUSTER_FAILURES, job.rerun(), "a command's own failure is its verdict");
    assertEquals(new OnPreemption("TERM", 42), job.preemption(), "TensorFlow's PreemptionCheckpointHandler's");
    assertEquals(EnumSet.of(TaskType.PS), parse("--command", "x", "--untracked", "ps").gang().untracked());
  }

  /** Each bad input: exit 2 and one line naming the option, before anything talks to YARN. */
  @Test
  void badOptionsAreOneLineAndExitTwo() {
    Map<List<String>, String> cases = Map.ofEntries(
        Map.entry(List.of("--worker-instances", "1"),
            "no command for the worker tasks: give --command CMD or --worker-command CMD"),
        Map.entry(List.of("--command", "x", "--worker-instances", "0"),
            "a gang needs a chief or at least one worker, was 0 workers"),
        Map.entry(List.of("--command", "x", "--chief-instances", "2"), "chief count must be in 0..1, was 2"),
        Map.entry(List.of("--command", "x", "--worker-instances", "two"),
            "--worker-instances must be an integer >= 0, was 'two'"),
        Map.entry(List.of("--command", "x", "--worker-memory", "2x"),
            "--worker-memory must be a memory size such as 512m, 2g or 1024 (MB), was '2x'"),
        Map.entry(List.of("--command", "x", "--env", "NOVALUE"), "--env takes NAME=VALUE, was 'NOVALUE'"),
        Map.entry(List.of("--command", "x", "--env", "MUSTER_ATTEMPT=3"),
            "the environment variable MUSTER_ATTEMPT is set by Muster for each task; leave it out of --env"),
        Map.entry(List.of("--command", "x", "--gang-timeout", "0s"),
            "--gang-timeout must be a positive duration such as 500ms, 60s, 5m or 1h; was '0s'"),
        Map.entry(List.of("--command", "x", "--untracked", "driver"),
            "--untracked takes task types from chief, worker, ps, evaluator; was 'driver'"),
        Map.entry(List.of("--command", "x", "--untracked", "worker"),
            "every task of the gang (1 worker) is untracked (worker), so nothing would end the job; track the chief "
                + "or the workers"),
        Map.entry(List.of("--command", "x", "--max-attempts", "0"), "--max-attempts must be an integer >= 1, was '0'"),
        Map.entry(List.of("--command", "x", "--rerun", "always"),
            "--rerun must be one of cluster-failures, any-failure, was 'always'"),
        Map.entry(List.of("--command", "x", "--conf", "/nonexistent/job.properties"),
            "--conf /nonexistent/job.properties cannot be read: no such file"),
        Map.entry(List.of("--command", "x", "--files", "/nonexistent/train.py"),
            "--files: /nonexistent/train.py is not a readable file"),
        Map.entry(List.of("--command", "x", "--app-timeout", "soon"),
            "--app-timeout must be a positive duration such as 500ms, 60s, 5m or 1h; was 'soon'"),
        Map.entry(List.of("--command", "x", "--preemption-signal", "KILL"),
            "'KILL' is not a signal a command can be sent to save and leave; use one of TERM, INT, HUP, QUIT, USR1, "
                + "USR2, PWR, ALRM, XCPU"),
        Map.entry(List.of("--command", "x", "--preemption-exit-code", "143"),
            "the exit code that says a command saved for preemption must be 1 to 125 (0 is success; above 125 the "
                + "shell's own codes), was 143"));
    cases.forEach((args, message) -> {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      ByteArrayOutputStream err = new ByteArrayOutputStream();
      List<String> argv = new java.util.ArrayList<>(List.of("submit"));
      argv.addAll(args);
      int code = Muster.run(argv, Map.of(), new PrintStream(out, true), new PrintStream(err, true));
      assertEquals(2, code, args.toString());
      assertEquals("muster submit: " + message + "\n", err.toString(StandardCharsets.UTF_8), args.toString());
      assertEquals("", out.toString(StandardCharsets.UTF_8));
    });
  }

  @Test
  void helpListsEveryOption() {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    assertEquals(0, Muster.run(List.of("submit", "--help"), Map.of(), new PrintStream(out, true), System.err));
    String help = out.toString(StandardCharsets.UTF_8);
    for (String option : List.of("--name", "--queue", "--command", "--<type>-instances", "--<type>-memory",
        "--<type>-vcores", "--<type>-gpus", "--<type>-command", "--env", "--max-attempts", "--gang-timeout",
        "--output-dir", "--untracked", "--files", "--archives", "--node-label", "--app-timeout", "--preemption-signal",
        "--preemption-exit-code", "--conf", "--local")) {
      assertTrue(help.contains(option), option);
    }
    ByteArrayOutputStream top = new ByteArrayOutputStream();
    Muster.run(List.of("--help"), Map.of(), new PrintStream(top, true), System.err);
    assertTrue(top.toString(StandardCharsets.UTF_8).contains("submit [options]"));
  }

  @Test
  void withoutAConfiguredClusterStatusKillAndSubmitFailAtOnceSayingWhatToSet(@org.junit.jupiter.api.io.TempDir
      java.nio.file.Path dir) throws Exception {
    for (List<String> argv : List.of(List.of("status", "application_1_0001"), List.of("kill", "application_1_0001"),
        List.of("submit", "--command", "true"))) {
      ByteArrayOutputStream err = new ByteArrayOutputStream();
      long start = System.nanoTime();
      int code = Muster.run(argv, Map.of(), new PrintStream(new ByteArrayOutputStream(), true),
          new PrintStream(err, true));
      String said = err.toString(StandardCharsets.UTF_8);
      assertEquals(1, code, said);
      assertEquals(1, said.lines().count(), said);
      assertTrue(said.startsWith("muster " + argv.get(0) + ": no YARN cluster is configured: "), said);
      assertTrue(Duration.ofNanos(System.nanoTime() - start).toSeconds() < 20, "at once, not after YARN's retries");
    }
    assertEquals("muster kill: give one application id, e.g. muster kill application_1700000000000_0001",
        usageError(List.of("kill")));
    assertEquals("muster status: 'x' is not an application id (application_<cluster>_<n>)",
        usageError(List.of("status", "x")), "a usage error comes before the missing cluster");
    assertEquals("no YARN cluster is configured: HADOOP_CONF_DIR=" + dir + " has no yarn-site.xml naming a "
        + "ResourceManager (yarn.resourcemanager.hostname or yarn.resourcemanager.address); point HADOOP_CONF_DIR at "
        + "the cluster's configuration directory, or use muster submit --local (muster yarn-local keeps a local one "
        + "running and prints its HADOOP_CONF_DIR)", org.junit.jupiter.api.Assertions.assertThrows(
            IllegalStateException.class, () -> SubmitCommand.clusterConfiguration(dir.toString())).getMessage());
    java.nio.file.Path site = java.nio.file.Files.writeString(dir.resolve("yarn-site.xml"), "<configuration><property>"
        + "<name>yarn.resourcemanager.hostname</name><value>rm1</value></property></configuration>");
    org.apache.hadoop.conf.Configuration conf = new org.apache.hadoop.yarn.conf.YarnConfiguration();
    assertTrue(!SubmitCommand.namesAResourceManager(conf), "YARN's defaults name no cluster");
    conf.addResource(new org.apache.hadoop.fs.Path(site.toUri()));
    assertTrue(SubmitCommand.namesAResourceManager(conf), "a yarn-site.xml that names the ResourceManager does");
  }

  private static String usageError(List<String> argv) {
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    assertEquals(2, Muster.run(argv, Map.of(), new PrintStream(new ByteArrayOutputStream(), true),
        new PrintStream(err, true)));
    return err.toString(StandardCharsets.UTF_8).strip();
  }
}
