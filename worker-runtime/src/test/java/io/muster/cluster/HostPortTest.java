package io.muster.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

/** host:port as TensorFlow's GetHostAndPort reads it, with the edges of every rule. */
class HostPortTest {

  private static String error(String address) {
    return assertThrows(ClusterConfigException.class, () -> HostPort.parse(address)).getMessage();
  }

  @Test
  void portsFromZeroTo65535() {
    assertEquals(new HostPort("h", 0), HostPort.parse("h:0"));
    assertEquals(new HostPort("h", 65535), HostPort.parse("h:65535"));
    assertEquals("address 'h:65536' has port 65536, outside 0..65535", error("h:65536"));
    assertEquals("address 'h:-1' has port -1, outside 0..65535", error("h:-1"));
    assertEquals("address 'h:+1' has port +1, outside 0..65535", error("h:+1"));
    assertEquals("address port must be in 0..65535, was 65536",
        assertThrows(ClusterConfigException.class, () -> new HostPort("h", 65536)).getMessage());
    assertEquals("address port must be in 0..65535, was -1",
        assertThrows(ClusterConfigException.class, () -> new HostPort("h", -1)).getMessage());
  }

  @Test
  void aHostAndAPortAreBothNeeded() {
    assertEquals(new HostPort("a", 1), HostPort.parse("a:1"));
    assertEquals("address ':1' has no port: expected host:port", error(":1"));
    assertEquals("address 'h:' has no port: expected host:port", error("h:"));
    assertEquals("address 'h' has no port: expected host:port", error("h"));
    assertEquals("address is empty: expected host:port", error(" "));
    assertEquals("address 'h:x' has a port that is not an integer: 'x'", error("h:x"));
  }

  @Test
  void ipv6HostsAreBracketed() {
    assertEquals(new HostPort("::1", 2222), HostPort.parse("[::1]:2222"));
    assertEquals(new HostPort("[", 2), HostPort.parse("[:2"));
    assertEquals("address '::1:2222' is ambiguous: write IPv6 hosts in brackets, [host]:port", error("::1:2222"));
    assertEquals("[fe80::1]:7", new HostPort("fe80::1", 7).toString());
    assertEquals("h:7", new HostPort("h", 7).toString());
  }
}
