package io.muster.internal.rpc;

import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import io.muster.rpc.TlsFiles;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ChannelCredentials;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ClientInterceptors;
import io.grpc.ForwardingClientCall;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.TlsChannelCredentials;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.muster.cluster.HostPort;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * One channel per peer address, shared by everything in the task that talks to that peer, each
 * sending the job token on every call. Channels connect lazily and reconnect by themselves; the
 * cache closes them all. Callers set a deadline on every call ({@code withDeadlineAfter}).
 */
public final class ChannelCache implements AutoCloseable {

  private final Security security;
  private final boolean directCallbacks;
  private final Map<HostPort, ManagedChannel> channels = new ConcurrentHashMap<>();
  private final Map<HostPort, Channel> authenticated = new ConcurrentHashMap<>();
  private volatile boolean closed;

  public ChannelCache(Security security) {
    this(security, false);
  }

  private ChannelCache(Security security, boolean directCallbacks) {
    this.security = security;
    this.directCallbacks = directCallbacks;
  }

  /**
   * Channels whose callbacks run on the transport's own threads instead of a thread pool: one
   * thread hand-off less per call, for callers whose callbacks only hand the result to a waiting
   * thread (never block, never run user code). The parameter-server and coordinator calls use it.
   */
  public static ChannelCache withDirectCallbacks(Security security) {
    return new ChannelCache(security, true);
  }

  /** The channel to a peer, carrying the job token. */
  public Channel get(HostPort peer) {
    if (closed) {
      throw new IllegalStateException("channel cache is closed");
    }
    return authenticated.computeIfAbsent(peer, p -> {
      NettyChannelBuilder builder = NettyChannelBuilder.forAddress(p.host(), p.port(), credentials());
      if (directCallbacks) {
        builder.directExecutor();
      }
      ManagedChannel channel = builder.build();
      channels.put(p, channel);
      return ClientInterceptors.intercept(channel, new AttachToken(security.token()));
    });
  }

  private ChannelCredentials credentials() {
    if (security.tls().isEmpty()) {
      return InsecureChannelCredentials.create();
    }
    TlsFiles tls = security.tls().get();
    try {
      return TlsChannelCredentials.newBuilder().trustManager(tls.trustedCertificates().toFile()).build();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read trusted TLS certificates " + tls.trustedCertificates(), e);
    }
  }

  @Override
  public void close() {
    closed = true;
    channels.values().forEach(ManagedChannel::shutdownNow);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(1); // cancelled calls end at once; a host cut off is not waited for
    for (ManagedChannel channel : channels.values()) {
      try {
        channel.awaitTermination(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
  }

  private static final class AttachToken implements ClientInterceptor {
    private final JobToken token;

    AttachToken(JobToken token) {
      this.token = token;
    }

    @Override
    public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
      return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
        @Override
        public void start(Listener<R> listener, Metadata headers) {
          headers.put(TokenCheck.HEADER, token.value());
          super.start(listener, headers);
        }
      };
    }
  }
}
