package io.muster.internal.coordination;

import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.internal.rpc.RefusedCall;
import java.io.IOException;
import java.net.InetAddress;
import java.util.Arrays;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Who a call refused at the token check claims to be, and whether the claim can stand: a call
 * names its task in its metadata, which anyone can write, so the service takes it as that task's
 * only when it comes from that task's host. Resolving the host is a DNS lookup, which the service
 * makes outside its lock.
 */
final class RefusedCaller {

  private static final Pattern TASK_NAME = Pattern.compile("/job:([^/]+)/replica:0/task:(\\d+)");

  private RefusedCaller() {}

  /** The task the call claims to come from, when it names one in TensorFlow's form. */
  static Optional<TaskId> claimedTask(RefusedCall call) {
    return call.claimedTask().flatMap(name -> {
      Matcher m = TASK_NAME.matcher(name);
      return m.matches() ? Optional.of(new TaskId(m.group(1), Integer.parseInt(m.group(2)))) : Optional.empty();
    });
  }

  /** Whether the call came from an address of the host in {@code taskAddress} ({@code host:port}). */
  static boolean fromHostOf(String taskAddress, RefusedCall call) {
    try {
      String host = HostPort.parse(taskAddress).host();
      return Arrays.asList(InetAddress.getAllByName(host)).contains(call.from());
    } catch (IOException | IllegalArgumentException e) {
      return false;
    }
  }
}
