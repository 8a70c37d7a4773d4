package io.muster.cli;

import java.io.PrintStream;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * {@code ./muster}: the command line. Results go to standard output, logs to standard error.
 * Exit codes: 0 success, 1 the check or job failed, 2 bad input (arguments, {@code TF_CONFIG},
 * environment), with one line saying what is wrong ({@code ClusterConfigException} and the other
 * input errors are {@link IllegalArgumentException}s).
 */
public final class Muster {

  static final String USAGE = String.join("\n",
      "usage: muster <command> [options]   (muster <command> --help: its options)",
      "  demo [--data FILE]      the main job: softmax regression on Spark local[N] with N barrier tasks",
      "  spark-run -- COMMAND    run a training command (python3 train.py ...) on a gang of Spark barrier tasks",
      "  example softmax         softmax regression on N local worker JVMs, each with its own TF_CONFIG",
      "  bench NAME              benchmarks: coordination, allreduce, checkpoint, spark, yarn (JSON lines)",
      "  submit [options]        run a training job on a YARN queue (muster submit --help)",
      "  status APPID            a YARN job's state and diagnostics",
      "  kill APPID              kill a YARN job",
      "  yarn-local [--dir D]    keep a local YARN cluster and HDFS running for muster submit",
      "  cluster                 print this task's identity from TF_CONFIG as JSON",
      "  check [--timeout 5m]    start this task's server, join the coordination service, wait for every task",
      "  server-def [--text]     write this task's TensorFlow ServerDef (binary, or text format)",
      "  checkpoint ls|verify    DIR's checkpoints and the latest's tensors; verify DIR: read each, check its CRC32C",
      "  events FILE_OR_DIR      the scalars of TensorBoard event files: step, tag, value",
      "environment: TF_CONFIG, MUSTER_JOB_TOKEN (check), MUSTER_TLS_CERT/MUSTER_TLS_KEY/MUSTER_TLS_CA (optional)");

  /** The usage of the commands that do not print their own on {@code --help}. */
  private static final Map<String, String> HELP = Map.of(
      "cluster", "usage: muster cluster   (prints this task's identity from TF_CONFIG as JSON)",
      "check", "usage: muster check [--timeout 5m]   (TF_CONFIG and MUSTER_JOB_TOKEN set the same on every task; "
          + "exit 0 when every task joined, 1 naming each missing task and what its last attempt said)",
      "server-def", "usage: muster server-def [--text]   (this task's TensorFlow ServerDef from TF_CONFIG)",
      "status", "usage: muster status APPID",
      "kill", "usage: muster kill APPID",
      "yarn-local", "usage: muster yarn-local [--dir muster-yarn-local]   keep a local YARN cluster and HDFS running; "
          + "prints its HADOOP_CONF_DIR");

  private Muster() {}

  public static void main(String[] args) {
    System.exit(run(Arrays.asList(args), System.getenv(), System.out, System.err));
  }

  static int run(List<String> args, Map<String, String> env, PrintStream out, PrintStream err) {
    if (args.isEmpty() || args.get(0).equals("--help") || args.get(0).equals("help")) {
      (args.isEmpty() ? err : out).println(USAGE);
      return args.isEmpty() ? 2 : 0;
    }
    List<String> options = args.subList(1, args.size());
    if (options.equals(List.of("--help")) && HELP.containsKey(args.get(0))) {
      out.println(HELP.get(args.get(0)));
      return 0;
    }
    try {
      return switch (args.get(0)) {
        case "cluster" -> ClusterCommand.run(options, env, out);
        case "check" -> CheckCommand.run(options, env, out, err);
        case "server-def" -> ServerDefCommand.run(options, env, out);
        case "checkpoint" -> CheckpointCommand.run(options, out, err);
        case "events" -> EventsCommand.run(options, out, err);
        case "submit" -> SubmitCommand.submit(options, SubmitCommand::clusterConfiguration, out, err);
        case "yarn-local" -> SubmitCommand.yarnLocal(options, out);
        case "status" -> SubmitCommand.status(options, SubmitCommand::clusterConfiguration, out);
        case "kill" -> SubmitCommand.kill(options, SubmitCommand::clusterConfiguration, out);
        default -> throw new UsageException("unknown command '" + args.get(0) + "'; try: muster --help");
      };
    } catch (UsageException | IllegalArgumentException e) {
      err.println("muster " + args.get(0) + ": " + e.getMessage());
      return 2;
    } catch (java.io.UncheckedIOException e) {
      err.println("muster " + args.get(0) + ": " + e.getMessage());
      return 1;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      err.println("muster " + args.get(0) + ": interrupted");
      return 1;
    } catch (Exception e) { // YARN's client: the cluster is unreachable, the application unknown, …
      // Hadoop's remote exceptions carry the server's stack trace in their message: its first line is the cause
      String message = String.valueOf(e.getMessage());
      err.println("muster " + args.get(0) + ": " + message.lines().findFirst().orElse(e.toString()));
      return 1;
    }
  }
}
