package io.muster.data;

import io.muster.internal.Json;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What the {@code tf.train.Example} records of a shard hold: one feature per column, written as
 * {@code schema.json} beside the TFRecord files so that a training script can build its
 * {@code tf.io.parse_example} spec without knowing the DataFrame ({@code FixedLenFeature([], dtype)}
 * for a scalar column, {@code VarLenFeature(dtype)} for a list column; a null value is a missing
 * feature, so nullable scalars need a {@code default_value}).
 *
 * @param columns in the DataFrame's order
 */
public record ExampleSchema(List<Column> columns) {

  /** Which of tf.train.Feature's three lists a column is written as. */
  public enum FeatureKind {
    INT64("int64_list", "int64"),
    FLOAT("float_list", "float32"),
    BYTES("bytes_list", "string");

    private final String field;
    private final String dtype;

    FeatureKind(String field, String dtype) {
      this.field = field;
      this.dtype = dtype;
    }

    /** The Feature field: {@code int64_list}, {@code float_list} or {@code bytes_list}. */
    public String field() {
      return field;
    }

    /** The TensorFlow dtype it parses to: {@code int64}, {@code float32} or {@code string}. */
    public String dtype() {
      return dtype;
    }

    static FeatureKind ofField(String field) {
      for (FeatureKind kind : values()) {
        if (kind.field.equals(field)) {
          return kind;
        }
      }
      throw new IllegalArgumentException("unknown feature kind '" + field + "'; expected int64_list, float_list or "
          + "bytes_list");
    }
  }

  /**
   * @param sourceType the column's type where it came from (Spark's {@code simpleString}, e.g. {@code array<float>})
   * @param list true when a value is a list of any length, false when it is one value
   */
  public record Column(String name, String sourceType, FeatureKind kind, boolean list, boolean nullable) {}

  public ExampleSchema {
    columns = List.copyOf(columns);
  }

  public String toJson() {
    List<Object> out = new ArrayList<>();
    for (Column c : columns) {
      Map<String, Object> column = new LinkedHashMap<>();
      column.put("name", c.name());
      column.put("source_type", c.sourceType());
      column.put("feature", c.kind().field());
      column.put("dtype", c.kind().dtype());
      column.put("shape", c.list() ? "list" : "scalar");
      column.put("nullable", c.nullable());
      out.add(column);
    }
    Map<String, Object> schema = new LinkedHashMap<>();
    schema.put("record", "tf.train.Example");
    schema.put("compression", "");
    schema.put("columns", out);
    return Json.write(schema);
  }

  /** Reads what {@link #toJson()} wrote. */
  @SuppressWarnings("unchecked")
  public static ExampleSchema parse(String json) {
    Map<String, Object> schema = (Map<String, Object>) Json.parse(json);
    List<Column> columns = new ArrayList<>();
    for (Object o : (List<Object>) schema.get("columns")) {
      Map<String, Object> c = (Map<String, Object>) o;
      columns.add(new Column((String) c.get("name"), (String) c.get("source_type"),
          FeatureKind.ofField((String) c.get("feature")), "list".equals(c.get("shape")),
          Boolean.TRUE.equals(c.get("nullable"))));
    }
    return new ExampleSchema(columns);
  }
}
