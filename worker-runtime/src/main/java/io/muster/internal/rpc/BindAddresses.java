package io.muster.internal.rpc;

import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.net.UnknownHostException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Where a task listens: on its address's host when that is one of this machine's addresses, and
 * on every interface otherwise (a name that resolves elsewhere, as behind NAT), as TensorFlow does.
 */
public final class BindAddresses {
  private static final Logger log = LoggerFactory.getLogger(BindAddresses.class);

  private BindAddresses() {}

  /** @throws UncheckedIOException naming the task when the host does not resolve */
  public static InetSocketAddress forHost(TaskId task, HostPort address) {
    InetAddress host;
    try {
      host = InetAddress.getByName(address.host());
    } catch (UnknownHostException e) {
      throw new UncheckedIOException("task " + task + " cannot listen on " + address
          + ": host '" + address.host() + "' does not resolve", e);
    }
    if (isLocal(host)) {
      return new InetSocketAddress(host, address.port());
    }
    log.info("{} resolves to {}, which is not an address of this machine; listening on all interfaces",
        address.host(), host.getHostAddress());
    return new InetSocketAddress(address.port());
  }

  private static boolean isLocal(InetAddress host) {
    if (host.isLoopbackAddress() || host.isAnyLocalAddress()) {
      return true;
    }
    try {
      return NetworkInterface.getByInetAddress(host) != null;
    } catch (SocketException e) {
      return false;
    }
  }}
