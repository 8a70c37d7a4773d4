package io.muster.internal.rpc;

import io.grpc.Channel;
import io.grpc.ClientInterceptors;
import io.grpc.Metadata;
import io.grpc.stub.MetadataUtils;
import io.muster.cluster.TaskId;
import java.net.InetAddress;
import java.util.Optional;

/**
 * A call a task server refused at its token check, as the server's owner hears of it
 * ({@link TaskServer#onRefusedCall}): the task the caller said it was (the {@code muster-task}
 * header, which a task's coordination agent sends), where the call came from, and why it was
 * refused. The claim is the caller's word, unauthenticated by definition: use it to explain a
 * wait, after checking that the call came from the claimed task's host.
 */
public record RefusedCall(Optional<String> claimedTask, InetAddress from, String why) {

  static final Metadata.Key<String> CALLER = Metadata.Key.of("muster-task", Metadata.ASCII_STRING_MARSHALLER);

  /** {@code channel}, saying on every call that it is {@code task}'s (the full name, {@code /job:worker/replica:0/task:1}). */
  public static Channel identifying(Channel channel, TaskId task) {
    Metadata header = new Metadata();
    header.put(CALLER, task.fullName());
    return ClientInterceptors.intercept(channel, MetadataUtils.newAttachHeadersInterceptor(header));
  }
}
