package io.muster.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** {@code ./muster bench yarn}'s own option errors: one line, exit 2, before the in-process cluster starts. */
class YarnBenchArgsTest {

  private static String[] run(int expectedCode, String... args) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int code = YarnBench.run(args, new PrintStream(out, true), new PrintStream(err, true));
    assertEquals(expectedCode, code, err.toString(StandardCharsets.UTF_8));
    return new String[] {out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8)};
  }

  @Test
  void badOptionsAreOneLineExitTwo() {
    assertEquals("muster bench yarn: unknown argument '--nodes'; options: --containers, --runs, --executors, --restart\n",
        run(2, "--nodes", "2")[1]);
    assertEquals("muster bench yarn: --runs must be a positive integer, was 'x'\n", run(2, "--runs", "x")[1]);
    assertEquals("muster bench yarn: --containers must be positive integers separated by commas (such as 4,8), "
        + "was '4,0'\n", run(2, "--containers", "4,0")[1]);
    assertEquals("muster bench yarn: --runs needs a value\n", run(2, "--runs")[1]);
    assertEquals("muster bench yarn: --executors must be both, archive or none, was 'cds'\n",
        run(2, "--executors", "cds")[1]);
    assertEquals("muster bench yarn: --restart must be both, keep or new, was 'warm'\n", run(2, "--restart", "warm")[1]);
  }

  @Test
  void helpPrintsTheUsage() {
    assertEquals(YarnBench.USAGE + "\n", run(0, "--help")[0]);
  }
}
