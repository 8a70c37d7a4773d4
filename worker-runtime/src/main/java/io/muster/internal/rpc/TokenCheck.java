package io.muster.internal.rpc;

import io.muster.rpc.JobToken;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Refuses, before any service code runs, every call that does not carry the job's token. */
final class TokenCheck implements ServerInterceptor {

  /** The call metadata that carries the job token. */
  static final Metadata.Key<String> HEADER = Metadata.Key.of("muster-job-token", Metadata.ASCII_STRING_MARSHALLER);

  private static final Logger log = LoggerFactory.getLogger(TokenCheck.class);

  private final JobToken token;
  private final String serverName;
  private volatile java.util.function.Consumer<RefusedCall> onRefused = call -> { };

  TokenCheck(JobToken token, String serverName) {
    this.token = token;
    this.serverName = serverName;
  }

  /** Told of every refused call, on the gRPC thread that refused it. */
  void onRefused(java.util.function.Consumer<RefusedCall> listener) {
    this.onRefused = listener;
  }

  @Override
  public <Q, R> ServerCall.Listener<Q> interceptCall(
      ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
    String presented = headers.get(HEADER);
    if (!token.matches(presented)) {
      String why = presented == null ? "call carries no job token" : "job token does not match";
      log.warn("refused {} from {}: {}", call.getMethodDescriptor().getFullMethodName(),
          call.getAttributes().get(io.grpc.Grpc.TRANSPORT_ATTR_REMOTE_ADDR), why);
      call.close(Status.UNAUTHENTICATED.withDescription(why + " (" + serverName + ")"), new Metadata());
      if (call.getAttributes().get(io.grpc.Grpc.TRANSPORT_ATTR_REMOTE_ADDR) instanceof java.net.InetSocketAddress from) {
        try {
          onRefused.accept(new RefusedCall(java.util.Optional.ofNullable(headers.get(RefusedCall.CALLER)), from.getAddress(),
              presented == null ? "no job token" : "wrong job token"));
        } catch (RuntimeException e) {
          log.warn("the refused-call listener of {} threw", serverName, e);
        }
      }
      return new ServerCall.Listener<>() {};
    }
    return next.startCall(call, headers);
  }
}
