package io.muster.internal.rpc;

import io.muster.rpc.BoundServer;
import io.muster.rpc.Security;
import io.muster.rpc.TlsFiles;
import io.grpc.BindableService;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallExecutorSupplier;
import io.grpc.InsecureServerCredentials;
import io.grpc.Server;
import io.grpc.ServerCredentials;
import io.grpc.ServerInterceptors;
import io.grpc.TlsServerCredentials;
import io.grpc.util.MutableHandlerRegistry;
import io.grpc.netty.shaded.io.grpc.netty.InternalNettyServerBuilder;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.BindException;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The one gRPC server of a task: it listens on the port of the task's address and hosts every
 * service the task runs, behind the job-token check (and TLS when configured).
 *
 * <p>{@link #start} binds before it returns, so a caller publishes the address only after the
 * port is held. Port 0 binds a free port; {@link #address()} reports the bound one. Services can
 * be added after the start, once the cluster is known (a launcher binds first, then exchanges
 * addresses, then starts the coordination service). The server
 * listens on the address's host when that is one of this machine's addresses, and on every
 * interface otherwise (a name that resolves elsewhere, as behind NAT), as TensorFlow does.
 *
 * <p>A connection that has not completed gRPC's handshake within {@link #HANDSHAKE_TIMEOUT} is
 * closed; connections that do not speak gRPC are logged as one WARN line, at most once per remote
 * address per minute, instead of gRPC's stack traces ({@link Strangers}).
 */
public final class TaskServer implements BoundServer {

  private static final Logger log = LoggerFactory.getLogger(TaskServer.class);
  private static final Duration GRACE = Duration.ofSeconds(5);
  /** How long a new connection has to complete gRPC's handshake (gRPC's default is 2 minutes). */
  public static final Duration HANDSHAKE_TIMEOUT = Duration.ofSeconds(10);

  private final Server server;
  private final MutableHandlerRegistry registry;
  private final Set<String> onTransport;
  private final ExecutorService executor;
  private final HostPort address;
  private final TaskId task;
  private final TokenCheck tokenCheck;

  private TaskServer(Server server, MutableHandlerRegistry registry, Set<String> onTransport, ExecutorService executor,
      HostPort address, TaskId task, TokenCheck tokenCheck) {
    this.server = server;
    this.registry = registry;
    this.onTransport = onTransport;
    this.executor = executor;
    this.address = address;
    this.task = task;
    this.tokenCheck = tokenCheck;
  }

  /**
   * Binds the task's port and starts serving (no services yet; see {@link #addService}).
   *
   * @throws UncheckedIOException naming the task and address when the port is taken or the
   *     host cannot be resolved
   */
  public static TaskServer start(TaskId task, HostPort address, Security security) {
    InetSocketAddress bind = BindAddresses.forHost(task, address);
    AtomicInteger threads = new AtomicInteger();
    String threadPrefix = "muster-grpc-" + task.job() + "-" + task.index() + "-";
    ExecutorService executor = Executors.newCachedThreadPool(r -> {
      Thread t = new Thread(r, threadPrefix + threads.incrementAndGet());
      t.setDaemon(true);
      return t;
    });
    MutableHandlerRegistry registry = new MutableHandlerRegistry();
    Set<String> onTransport = ConcurrentHashMap.newKeySet();
    Strangers strangers = new Strangers("task " + task + " at " + address, security.tls().isPresent(), HANDSHAKE_TIMEOUT);
    NettyServerBuilder builder = NettyServerBuilder.forAddress(bind, credentials(security))
        .executor(executor)
        .fallbackHandlerRegistry(registry)
        .callExecutor(new ServerCallExecutorSupplier() {
          @Override
          public <Q, R> Executor getExecutor(ServerCall<Q, R> call, Metadata headers) {
            return onTransport.contains(call.getMethodDescriptor().getFullMethodName()) ? Runnable::run : null;
          }
        })
        .handshakeTimeout(HANDSHAKE_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
    // gRPC's shared NIO event loops, with a server channel that lets Strangers see each connection first
    InternalNettyServerBuilder.useNioTransport(builder);
    Server server = builder.channelFactory(strangers::newServerChannel).build();
    try {
      server.start();
    } catch (IOException e) {
      executor.shutdownNow();
      String why = portTaken(e)
          ? "port " + address.port() + " is already in use; stop the process holding it or give "
              + task + " another port in TF_CONFIG"
          : e.getMessage();
      throw new UncheckedIOException("task " + task + " cannot listen on " + address + ": " + why, e);
    }
    HostPort bound = new HostPort(address.host(), server.getPort());
    strangers.describeServer("task " + task + " at " + bound);
    log.info("task {} serving on {}{}", task, bound, security.tls().isPresent() ? " (TLS)" : "");
    return new TaskServer(server, registry, onTransport, executor, bound, task,
        new TokenCheck(security.token(), "task " + task.fullName()));
  }

  /** Serves another service from now on, behind the token check. */
  public void addService(BindableService service) {
    registry.addService(ServerInterceptors.intercept(service, tokenCheck));
  }

  /**
   * Serves another service whose named methods never block (no waiting, no user code, work of well
   * under a millisecond): their calls run on the transport's thread, one thread hand-off less per
   * call. The service's other methods run on the server's threads as usual.
   */
  public void addService(BindableService service, Set<String> nonBlockingMethods) {
    String name = service.bindService().getServiceDescriptor().getName();
    nonBlockingMethods.forEach(m -> onTransport.add(name + "/" + m));
    addService(service);
  }

  /**
   * Tells {@code listener} of every call refused at the token check from now on (one listener; a
   * later one replaces it), on the gRPC thread that refused it; it must not block.
   */
  public void onRefusedCall(java.util.function.Consumer<RefusedCall> listener) {
    tokenCheck.onRefused(listener);
  }

  /** The address peers reach this task at, with the bound port. */
  @Override
  public HostPort address() {
    return address;
  }

  public int port() {
    return address.port();
  }

  @Override
  public TaskId task() {
    return task;
  }

  /** Stops accepting calls, lets calls in flight finish for up to 5 s, then cancels the rest. */
  @Override
  public void close() {
    close(GRACE);
  }

  /**
   * Stops at once, cancelling the calls in flight: after the job failed, when a peer may be gone
   * without a word. (A graceful stop waits for every client to acknowledge it, up to 10 s in
   * gRPC, and one on a host cut off never does.)
   */
  @Override
  public void closeNow() {
    close(Duration.ZERO);
  }

  private void close(Duration grace) {
    server.shutdown();
    try {
      if (!server.awaitTermination(grace.toMillis(), TimeUnit.MILLISECONDS)) {
        server.shutdownNow().awaitTermination(GRACE.toMillis(), TimeUnit.MILLISECONDS);
      }
    } catch (InterruptedException e) {
      server.shutdownNow();
      Thread.currentThread().interrupt();
    } finally {
      executor.shutdownNow();
    }
    log.debug("task server for {} at {} stopped", task, address);
  }

  private static ServerCredentials credentials(Security security) {
    if (security.tls().isEmpty()) {
      return InsecureServerCredentials.create();
    }
    TlsFiles tls = security.tls().get();
    try {
      return TlsServerCredentials.create(tls.certificateChain().toFile(), tls.privateKey().toFile());
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read TLS certificate " + tls.certificateChain()
          + " or key " + tls.privateKey() + ": " + e.getMessage(), e);
    }
  }

  /** Netty reports a taken port as a BindException or as its own native exception, somewhere in the chain. */
  private static boolean portTaken(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof BindException || String.valueOf(t.getMessage()).contains("Address already in use")) {
        return true;
      }
    }
    return false;
  }


}
