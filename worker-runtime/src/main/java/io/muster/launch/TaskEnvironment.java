package io.muster.launch;

import io.muster.cluster.TaskId;
import io.muster.cluster.TfConfig;
import io.muster.rpc.JobToken;
import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * What every launcher tells an external command about its task, in environment variables:
 *
 * <ul>
 *   <li>{@code TF_CONFIG}: the gang's cluster and this task ({@link Gang#tfConfig});
 *   <li>{@code CUDA_VISIBLE_DEVICES}: this task's GPUs, empty when it has none (so it cannot take
 *       another task's);
 *   <li>{@code MUSTER_TASK_TYPE}, {@code MUSTER_TASK_INDEX}; {@code MUSTER_NUM_WORKERS}, the chief and
 *       workers (ps and evaluator tasks are not counted); {@code MUSTER_IS_CHIEF}, TensorFlow's
 *       {@code is_chief} ({@code true}/{@code false}); {@code MUSTER_ATTEMPT} (0, 1, … as the gang is re-run);
 *   <li>{@code MUSTER_WORK_DIR}, a private directory deleted when the task ends, and
 *       {@code MUSTER_RESULT_FILE} in it, where the chief may leave its result;
 *   <li>{@code TMPDIR}, {@code tmp} in that directory, unless the command's environment names one
 *       ({@link #putTemporaryDirectory}): a command's temporary files (Python's {@code tempfile},
 *       TensorFlow's AutoGraph modules, {@code mktemp}) go with its task;
 *   <li>{@code MUSTER_OUTPUT_DIR}, when the job has one: a directory of the local file system as a
 *       plain path ({@code file:///tmp/x} becomes {@code /tmp/x}, which a shell or Python's
 *       {@code open} can use), any other as the URI given ({@code hdfs://nn:8020/jobs/x});
 *       {@code MUSTER_JOB_TOKEN}, the job's secret (Muster's own runtime in the command needs it).
 * </ul>
 */
public final class TaskEnvironment {

  public static final String RESULT_FILE = "result";
  private static final String TMPDIR = "TMPDIR";

  private TaskEnvironment() {}

  public static Map<String, String> of(Gang gang, int member, int attempt, List<String> gpus, Path workDir,
      Optional<String> outputDir, JobToken token) {
    TaskId task = gang.task(member);
    Map<String, String> env = new LinkedHashMap<>();
    env.put(TfConfig.ENV, gang.tfConfig(member).toJson());
    env.put("CUDA_VISIBLE_DEVICES", String.join(",", gpus));
    env.put("MUSTER_TASK_TYPE", task.job());
    env.put("MUSTER_TASK_INDEX", Integer.toString(task.index()));
    env.put("MUSTER_NUM_WORKERS", Integer.toString(gang.spec().trainers()));
    env.put("MUSTER_IS_CHIEF", Boolean.toString(gang.isChief(member)));
    env.put("MUSTER_ATTEMPT", Integer.toString(attempt));
    env.put("MUSTER_WORK_DIR", workDir.toString());
    env.put("MUSTER_RESULT_FILE", workDir.resolve(RESULT_FILE).toString());
    outputDir.ifPresent(dir -> env.put("MUSTER_OUTPUT_DIR", forCommand(dir)));
    env.put(JobToken.ENV, token.value());
    return env;
  }

  /**
   * An output directory as a command sees it: a {@code file:} URI as its plain path (a shell and
   * Python's {@code open} take {@code file:///tmp/x} for a relative path that starts with a
   * directory named {@code file:}), any other as given.
   */
  static String forCommand(String dir) {
    if (!dir.regionMatches(true, 0, "file:", 0, "file:".length())) {
      return dir;
    }
    try {
      String path = new URI(dir).getPath();
      if (path != null && !path.isEmpty()) {
        return path;
      }
    } catch (URISyntaxException notEscaped) {
      // a URI as a person types it ("file:/tmp/my dir"): its path is the rest, less an empty authority
    }
    String rest = dir.substring("file:".length());
    return rest.startsWith("///") ? rest.substring(2) : rest;
  }

  /**
   * Points {@code TMPDIR} at {@code tmp} in the task's private directory, which it creates, unless
   * {@code env} (what the command is given) or this process's environment (what it inherits) names
   * one already: a killed or finished command's temporary files are deleted with that directory
   * instead of staying in the machine's {@code /tmp}.
   */
  public static void putTemporaryDirectory(Map<String, String> env, Path workDir) throws IOException {
    if (!env.containsKey(TMPDIR) && System.getenv(TMPDIR) == null) {
      env.put(TMPDIR, Files.createDirectories(workDir.resolve("tmp")).toString());
    }
  }

  /** Variables Muster sets for every task, which a user's own environment may not override. */
  public static boolean isReserved(String variable) {
    return variable.equals(TfConfig.ENV) || variable.equals("CUDA_VISIBLE_DEVICES") || variable.startsWith("MUSTER_");
  }
}
