package io.muster.internal;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small, strict JSON reader and writer for {@code TF_CONFIG} and Muster's command output.
 *
 * <p>Values are {@code Map<String, Object>} (insertion order), {@code List<Object>},
 * {@code String}, {@link BigDecimal}, {@code Boolean} and {@code null}. Unlike Python's
 * {@code json.loads}, a repeated key in one object is an error rather than "last one wins",
 * because in a {@code TF_CONFIG} it is always a mistake. Errors carry the line and column.
 * Kept here rather than taken from a JSON library so that the identity module has no
 * dependency that could clash with Spark's or Hadoop's.
 */
public final class Json {

  private final String text;
  private int pos;

  private Json(String text) {
    this.text = text;
  }

  /** Parses one JSON value; anything but whitespace after it is an error. */
  public static Object parse(String text) {
    Json parser = new Json(text);
    parser.skipWhitespace();
    Object value = parser.readValue();
    parser.skipWhitespace();
    if (parser.pos != text.length()) {
      throw parser.error("unexpected '" + text.charAt(parser.pos) + "' after the end of the value");
    }
    return value;
  }

  /** Writes a value in Python's {@code json.dumps} default style ({@code ", "} and {@code ": "}). */
  public static String write(Object value) {
    StringBuilder out = new StringBuilder();
    write(value, out);
    return out.toString();
  }

  private static void write(Object value, StringBuilder out) {
    if (value == null) {
      out.append("null");
    } else if (value instanceof String s) {
      writeString(s, out);
    } else if (value instanceof Boolean || value instanceof Integer || value instanceof Long
        || value instanceof BigDecimal) {
      out.append(value instanceof BigDecimal d ? d.toPlainString() : value.toString());
    } else if (value instanceof Double || value instanceof Float) {
      double d = ((Number) value).doubleValue();
      if (!Double.isFinite(d)) {
        throw new IllegalArgumentException("JSON has no representation for " + d);
      }
      out.append(value);
    } else if (value instanceof Map<?, ?> map) {
      out.append('{');
      String sep = "";
      for (Map.Entry<?, ?> e : map.entrySet()) {
        out.append(sep);
        writeString(String.valueOf(e.getKey()), out);
        out.append(": ");
        write(e.getValue(), out);
        sep = ", ";
      }
      out.append('}');
    } else if (value instanceof Iterable<?> list) {
      out.append('[');
      String sep = "";
      for (Object item : list) {
        out.append(sep);
        write(item, out);
        sep = ", ";
      }
      out.append(']');
    } else {
      throw new IllegalArgumentException("cannot write " + value.getClass().getName() + " as JSON");
    }
  }

  private static void writeString(String s, StringBuilder out) {
    out.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\n' -> out.append("\\n");
        case '\r' -> out.append("\\r");
        case '\t' -> out.append("\\t");
        default -> {
          if (c < 0x20) {
            out.append(String.format("\\u%04x", (int) c));
          } else {
            out.append(c);
          }
        }
      }
    }
    out.append('"');
  }

  private Object readValue() {
    if (pos >= text.length()) {
      throw error("unexpected end of input, expected a value");
    }
    char c = text.charAt(pos);
    return switch (c) {
      case '{' -> readObject();
      case '[' -> readArray();
      case '"' -> readString();
      case 't' -> readLiteral("true", Boolean.TRUE);
      case 'f' -> readLiteral("false", Boolean.FALSE);
      case 'n' -> readLiteral("null", null);
      default -> {
        if (c == '-' || (c >= '0' && c <= '9')) {
          yield readNumber();
        }
        throw error("unexpected '" + c + "', expected a value");
      }
    };
  }

  private Map<String, Object> readObject() {
    Map<String, Object> map = new LinkedHashMap<>();
    pos++;
    skipWhitespace();
    if (peek() == '}') {
      pos++;
      return Collections.unmodifiableMap(map);
    }
    while (true) {
      skipWhitespace();
      if (peek() != '"') {
        throw error("expected a string key");
      }
      int keyStart = pos;
      String key = readString();
      skipWhitespace();
      expect(':');
      skipWhitespace();
      Object value = readValue();
      if (map.containsKey(key)) {
        pos = keyStart;
        throw error("duplicate key \"" + key + "\"");
      }
      map.put(key, value);
      skipWhitespace();
      char c = peek();
      pos++;
      if (c == '}') {
        return Collections.unmodifiableMap(map);
      }
      if (c != ',') {
        pos--;
        throw error("expected ',' or '}'");
      }
    }
  }

  private List<Object> readArray() {
    List<Object> list = new ArrayList<>();
    pos++;
    skipWhitespace();
    if (peek() == ']') {
      pos++;
      return Collections.unmodifiableList(list);
    }
    while (true) {
      skipWhitespace();
      list.add(readValue());
      skipWhitespace();
      char c = peek();
      pos++;
      if (c == ']') {
        return Collections.unmodifiableList(list);
      }
      if (c != ',') {
        pos--;
        throw error("expected ',' or ']'");
      }
    }
  }

  private String readString() {
    expect('"');
    StringBuilder out = new StringBuilder();
    while (true) {
      if (pos >= text.length()) {
        throw error("unterminated string");
      }
      char c = text.charAt(pos++);
      if (c == '"') {
        return out.toString();
      }
      if (c < 0x20) {
        pos--;
        throw error("control character in string");
      }
      if (c != '\\') {
        out.append(c);
        continue;
      }
      if (pos >= text.length()) {
        throw error("unterminated string");
      }
      char e = text.charAt(pos++);
      switch (e) {
        case '"', '\\', '/' -> out.append(e);
        case 'b' -> out.append('\b');
        case 'f' -> out.append('\f');
        case 'n' -> out.append('\n');
        case 'r' -> out.append('\r');
        case 't' -> out.append('\t');
        case 'u' -> {
          if (pos + 4 > text.length()) {
            throw error("truncated \\u escape");
          }
          try {
            out.append((char) Integer.parseInt(text.substring(pos, pos + 4), 16));
          } catch (NumberFormatException ex) {
            throw error("bad \\u escape");
          }
          pos += 4;
        }
        default -> {
          pos--;
          throw error("bad escape '\\" + e + "'");
        }
      }
    }
  }

  private BigDecimal readNumber() {
    int start = pos;
    if (peek() == '-') {
      pos++;
    }
    while (pos < text.length() && "0123456789.eE+-".indexOf(text.charAt(pos)) >= 0) {
      pos++;
    }
    String literal = text.substring(start, pos);
    if (!literal.matches("-?(0|[1-9]\\d*)(\\.\\d+)?([eE][+-]?\\d+)?")) {
      pos = start;
      throw error("malformed number '" + literal + "'");
    }
    return new BigDecimal(literal);
  }

  private Object readLiteral(String word, Object value) {
    if (!text.startsWith(word, pos)) {
      throw error("unexpected '" + text.charAt(pos) + "', expected a value");
    }
    pos += word.length();
    return value;
  }

  private void expect(char c) {
    if (peek() != c) {
      throw error("expected '" + c + "'");
    }
    pos++;
  }

  private char peek() {
    if (pos >= text.length()) {
      throw error("unexpected end of input");
    }
    return text.charAt(pos);
  }

  private void skipWhitespace() {
    while (pos < text.length() && " \t\r\n".indexOf(text.charAt(pos)) >= 0) {
      pos++;
    }
  }

  private JsonException error(String what) {
    int line = 1;
    int column = 1;
    for (int i = 0; i < Math.min(pos, text.length()); i++) {
      if (text.charAt(i) == '\n') {
        line++;
        column = 1;
      } else {
        column++;
      }
    }
    return new JsonException("malformed JSON at line " + line + ", column " + column + ": " + what);
  }

  /** Thrown for text that is not valid JSON; the message gives the line and column. */
  public static final class JsonException extends IllegalArgumentException {
    JsonException(String message) {
      super(message);
    }
  }
}
