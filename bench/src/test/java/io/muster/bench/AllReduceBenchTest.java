package io.muster.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.internal.Json;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * {@code muster bench allreduce}'s output contract, which {@code ../shared/bench/run-anchors.sh}
 * reads: one JSON line per size with the fields it needs, and the algorithm the size took.
 */
class AllReduceBenchTest {

  @Test
  void eachSizeIsOneJsonLineNamingTheAlgorithmItTook() throws Exception {
    ByteArrayOutputStream captured = new ByteArrayOutputStream();
    List<Map<?, ?>> lines = run(List.of("2", "4K", "128K"), captured);
    assertEquals(2, lines.size(), captured.toString(StandardCharsets.UTF_8));
    String[] algorithms = {"gather", "ring"};
    long[] sizes = {4096, 131072};
    for (int i = 0; i < 2; i++) {
      Map<?, ?> line = lines.get(i);
      assertEquals("muster-ring", line.get("method"));
      assertEquals(2L, ((Number) line.get("ranks")).longValue());
      assertEquals(sizes[i], ((Number) line.get("bytes")).longValue());
      assertEquals(algorithms[i], line.get("algorithm"));
      assertEquals(false, line.get("tls"));
      double median = ((Number) line.get("median_s")).doubleValue();
      double mean = ((Number) line.get("mean_s")).doubleValue();
      assertTrue(median > 0 && median < 1 && mean > 0 && mean < 1, line.toString());
      assertTrue(((Number) line.get("ops")).longValue() >= 5, line.toString());
    }
  }

  @Test
  void firstStepsAreOneJsonLinePerSizeOnAFreshGang() throws Exception {
    ByteArrayOutputStream captured = new ByteArrayOutputStream();
    List<Map<?, ?>> lines = run(List.of("--first-steps", "2", "4K"), captured);
    assertEquals(1, lines.size(), captured.toString(StandardCharsets.UTF_8));
    Map<?, ?> line = lines.get(0);
    assertEquals("first_steps", line.get("what"));
    assertEquals(2L, ((Number) line.get("ranks")).longValue());
    assertEquals(4096L, ((Number) line.get("bytes")).longValue());
    assertEquals(100L, ((Number) line.get("steps")).longValue());
    double first = ((Number) line.get("first_s")).doubleValue();
    double steady = ((Number) line.get("steady_s")).doubleValue();
    assertTrue(first > 0 && steady > 0 && first < 60 && steady < 60, line.toString());
    assertEquals(first - steady, ((Number) line.get("extra_s")).doubleValue(), 1e-9, line.toString());
    assertTrue(((Number) line.get("settling_s")).doubleValue() > 0, line.toString());
  }

  @Test
  void eachWarmUpIsAFreshGangThatSaysWhatItRanAndWhenItsStepsEnded() throws Exception {
    ByteArrayOutputStream captured = new ByteArrayOutputStream();
    List<Map<?, ?>> lines = run(List.of("--first-steps", "--warm-up", "none,loopback:40", "2", "4K"), captured);
    assertEquals(2, lines.size(), captured.toString(StandardCharsets.UTF_8));
    assertEquals("none", lines.get(0).get("warm_up"));
    assertEquals(0L, ((Number) lines.get(0).get("warm_up_ops")).longValue());
    assertEquals("loopback:40", lines.get(1).get("warm_up"));
    // the warm-up stops at its count or when the gang forms, whichever comes first, after whole rounds
    long warmUpOps = ((Number) lines.get(1).get("warm_up_ops")).longValue();
    assertTrue(warmUpOps <= 40 && warmUpOps % LoopbackWarmUp.ROUND == 0, lines.get(1).toString());
    for (Map<?, ?> line : lines) {
      double gang = ((Number) line.get("launch_to_gang_s")).doubleValue();
      double lastStep = ((Number) line.get("launch_to_step_100_s")).doubleValue();
      double first = ((Number) line.get("first_s")).doubleValue();
      assertTrue(gang > 0 && gang < 60, line.toString());
      assertTrue(lastStep - gang >= first - 0.01, "the first steps end after the gang forms and they ran: " + line);
    }
  }

  /** The benchmark's JSON lines on stdout, parsed; {@code captured} keeps the raw output for messages. */
  private static List<Map<?, ?>> run(List<String> args, ByteArrayOutputStream captured) throws Exception {
    PrintStream original = System.out;
    System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
    try {
      AllReduceBench.parse(args).run();
    } finally {
      System.setOut(original);
    }
    List<Map<?, ?>> lines = new ArrayList<>();
    for (String line : captured.toString(StandardCharsets.UTF_8).split("\n")) {
      lines.add((Map<?, ?>) Json.parse(line));
    }
    return lines;
  }
}
