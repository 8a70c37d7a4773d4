package io.muster.yarn;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The master's page, from the status it is given. */
class StatusPageTest {

  private static Map<String, Object> status(String preemption) {
    Map<String, Object> status = new LinkedHashMap<>();
    status.put("application", "train");
    status.put("state", "running");
    status.put("attempt", 1);
    status.put("max_attempts", 1);
    status.put("output_dir", "hdfs:///o");
    status.put("diagnostics", "");
    status.put("lost_nodes", Map.of());
    status.put("preemption", preemption);
    status.put("tasks", List.of());
    return status;
  }

  @Test
  void aPreemptionNoticeIsShownWhileTheGangSavesAndEscaped() {
    String page = StatusPage.html(status("preemption notice for worker 0 (container c_1 on <host>)"));
    assertTrue(page.contains("<p id=\"preemption\"><b>preemption notice for worker 0 (container c_1 on &lt;host&gt;)"
        + "</b>: every task is saving</p>"), page);
    assertFalse(StatusPage.html(status(null)).contains("id=\"preemption\""), "no notice, no line");
  }
}
