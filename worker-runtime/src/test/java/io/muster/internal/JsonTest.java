package io.muster.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.math.BigDecimal;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The strict JSON reader and writer behind TF_CONFIG, with literal inputs and outputs. */
class JsonTest {

  private static String error(String text) {
    return assertThrows(Json.JsonException.class, () -> Json.parse(text)).getMessage();
  }

  @Test
  void whitespaceIsAllowedAroundEveryToken() {
    assertEquals(Map.of("a", List.of(new BigDecimal("1"), Boolean.TRUE), "b", Map.of()),
        Json.parse(" \t\r\n{ \"a\" : [ 1 , true ] , \"b\" : { } }\n "));
    assertEquals(List.of(), Json.parse("[ ]"));
    assertEquals(List.of(List.of(), Map.of()), Json.parse("[[],{}]"));
  }

  @Test
  void literalsAndNumbers() {
    assertEquals(Arrays.asList(Boolean.TRUE, Boolean.FALSE, null, new BigDecimal("-0.5e+3"), new BigDecimal("0"),
        new BigDecimal("12.25")), Json.parse("[true, false, null, -0.5e+3, 0, 12.25]"));
    assertEquals(List.of(new BigDecimal("9"), new BigDecimal("0")), Json.parse("[9,0]"));
    assertEquals("malformed JSON at line 1, column 2: malformed number '01'", error("[01]"));
    assertEquals("malformed JSON at line 1, column 1: malformed number '-'", error("-"));
    assertEquals("malformed JSON at line 1, column 2: malformed number '1.'", error("[1.]"));
    assertEquals("malformed JSON at line 1, column 1: unexpected 't', expected a value", error("tru"));
    assertEquals("malformed JSON at line 1, column 1: unexpected 'x', expected a value", error("x"));
  }

  @Test
  void escapesAreDecoded() {
    assertEquals("q\" b\\ s/ \b\f\n\r\t A\u00e9", Json.parse("\"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t \\u0041\\u00E9\""));
  }

  @Test
  void badStringsAreErrorsAtTheirPosition() {
    assertEquals("malformed JSON at line 1, column 5: unterminated string", error("\"abc"));
    assertEquals("malformed JSON at line 1, column 5: unterminated string", error("\"ab\\"));
    assertEquals("malformed JSON at line 1, column 4: control character in string", error("\"ab\u0001\""));
    assertEquals("malformed JSON at line 1, column 3: bad escape '\\x'", error("\"\\x\""));
    assertEquals("malformed JSON at line 1, column 4: truncated \\u escape", error("\"\\u12\""));
    assertEquals("malformed JSON at line 1, column 4: truncated \\u escape", error("\"\\u123"));
    assertEquals("malformed JSON at line 1, column 8: unterminated string", error("\"\\u0041"));
    assertEquals("malformed JSON at line 1, column 4: bad \\u escape", error("\"\\u12g4\""));
  }

  @Test
  void structuralErrorsNameLineAndColumn() {
    assertEquals("malformed JSON at line 2, column 3: duplicate key \"a\"", error("{\"a\": 1,\n  \"a\": 2}"));
    assertEquals("malformed JSON at line 1, column 9: expected ',' or '}'", error("{\"a\": 1 \"b\": 2}"));
    assertEquals("malformed JSON at line 1, column 4: expected ',' or ']'", error("[1 2]"));
    assertEquals("malformed JSON at line 1, column 2: expected a string key", error("{1: 2}"));
    assertEquals("malformed JSON at line 1, column 6: expected ':'", error("{\"a\" 1}"));
    assertEquals("malformed JSON at line 1, column 4: unexpected end of input, expected a value", error("[1,"));
    assertEquals("malformed JSON at line 1, column 3: unexpected end of input", error("[1"));
    assertEquals("malformed JSON at line 1, column 1: unexpected end of input, expected a value", error(""));
    assertEquals("malformed JSON at line 3, column 2: unexpected '}' after the end of the value", error("{}\n\n }"));
  }

  @Test
  void writesPythonsDefaultStyleAndEscapesControlCharacters() {
    Map<String, Object> value = new LinkedHashMap<>();
    value.put("s", "q\" b\\ \n\r\t \u0001\u001f\u0020~");
    value.put("n", Arrays.asList(1, 2L, new BigDecimal("1E+3"), 0.5, 1.5f, true, null));
    value.put("e", Map.of());
    assertEquals("{\"s\": \"q\\\" b\\\\ \\n\\r\\t \\u0001\\u001f ~\", \"n\": [1, 2, 1000, 0.5, 1.5, true, null], \"e\": {}}",
        Json.write(value));
    assertEquals(value.get("s"), ((Map<?, ?>) Json.parse(Json.write(value))).get("s"));
  }

  @Test
  void refusesWhatJsonCannotHold() {
    assertEquals("JSON has no representation for NaN",
        assertThrows(IllegalArgumentException.class, () -> Json.write(Double.NaN)).getMessage());
    assertEquals("JSON has no representation for Infinity",
        assertThrows(IllegalArgumentException.class, () -> Json.write(Float.POSITIVE_INFINITY)).getMessage());
    assertEquals("cannot write java.lang.Object as JSON",
        assertThrows(IllegalArgumentException.class, () -> Json.write(new Object())).getMessage());
  }
}
