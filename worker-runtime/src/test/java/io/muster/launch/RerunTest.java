package io.muster.launch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class RerunTest {

  @Test
  void anExitCodeIsTheCommandsOwnFromOneTo128ButNotTheRequestForARerun() {
    for (int own : new int[] {1, 2, 3, 74, 76, 127, 128}) {
      assertTrue(Rerun.isCommandsOwn(own), "exit " + own);
    }
    for (int clusters : new int[] {Rerun.EX_TEMPFAIL, 129, 137, 143, -100, -102}) {
      assertFalse(Rerun.isCommandsOwn(clusters), "exit " + clusters);
    }
  }

  @Test
  void theRerunOptionNamesItsValues() {
    assertEquals(Rerun.ANY_FAILURE, Rerun.parse("--rerun", "any-failure"));
    assertEquals(Rerun.CLUSTER_FAILURES, Rerun.parse("--rerun", "cluster-failures"));
    assertEquals("--rerun must be one of cluster-failures, any-failure, was 'always'",
        assertThrows(IllegalArgumentException.class, () -> Rerun.parse("--rerun", "always")).getMessage());
  }
}
