package io.muster.cluster;

/**
 * A task address as TensorFlow writes it: {@code host:port}, with IPv6 hosts in brackets
 * ({@code [::1]:2222}). The port is what follows the last colon, as in TensorFlow's
 * {@code GetHostAndPort}; port 0 means "any free port" when a server binds it.
 */
public record HostPort(String host, int port) implements java.io.Serializable {

  public HostPort {
    if (host == null || host.isEmpty()) {
      throw new ClusterConfigException("address host must be non-empty");
    }
    if (port < 0 || port > 65535) {
      throw new ClusterConfigException("address port must be in 0..65535, was " + port);
    }
  }

  /**
   * Parses {@code host:port}.
   *
   * @throws ClusterConfigException naming the address when it has no port, a port that is not
   *     an integer, or one outside 0..65535
   */
  public static HostPort parse(String address) {
    if (address == null || address.isBlank()) {
      throw new ClusterConfigException("address is empty: expected host:port");
    }
    int colon = address.lastIndexOf(':');
    if (colon <= 0 || colon == address.length() - 1) {
      throw new ClusterConfigException("address '" + address + "' has no port: expected host:port");
    }
    String host = address.substring(0, colon);
    String portText = address.substring(colon + 1);
    if (host.startsWith("[") && host.endsWith("]")) {
      host = host.substring(1, host.length() - 1);
    } else if (host.contains(":")) {
      throw new ClusterConfigException(
          "address '" + address + "' is ambiguous: write IPv6 hosts in brackets, [host]:port");
    }
    int port;
    try {
      port = Integer.parseInt(portText);
    } catch (NumberFormatException e) {
      throw new ClusterConfigException(
          "address '" + address + "' has a port that is not an integer: '" + portText + "'");
    }
    if (port < 0 || port > 65535 || !portText.matches("\\d+")) {
      throw new ClusterConfigException("address '" + address + "' has port " + portText + ", outside 0..65535");
    }
    return new HostPort(host, port);
  }

  @Override
  public String toString() {
    return (host.contains(":") ? "[" + host + "]" : host) + ":" + port;
  }
}
