package io.muster.rig;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

/** The rig's fault options refuse what they cannot do in one line, before any command runs (no root needed). */
class FaultOptionsTest {

  @Test
  void aHostTheRigDoesNotHaveIsRefusedNamingTheHostsItHas() {
    assertEquals(3, EmulatedHosts.checkHost(3, 4));
    for (int number : new int[] {0, 5, -1}) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> EmulatedHosts.checkHost(number, 4));
      assertEquals("there is no host" + number + " on this rig: it has host1..host4", e.getMessage());
    }
  }

  @Test
  void aRateThatIsNotTcsIsRefusedWithAnExample() {
    for (String rate : new String[] {"10mbit", "1gbit", "500kbps", "2.5mbit", "1000bit"}) {
      assertEquals(rate, Host.checkRate(rate));
    }
    for (String rate : new String[] {"10 mbit", "fast", "10", "mbit", "-1mbit", "10MB/s", ""}) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Host.checkRate(rate));
      assertEquals("rate '" + rate + "' is not a tc rate: a number and a unit, such as 10mbit, 1gbit or 500kbps",
          e.getMessage());
    }
  }
}
