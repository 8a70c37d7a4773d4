package io.muster.summary;

import com.google.protobuf.InvalidProtocolBufferException;
import io.muster.data.TfRecordReader;
import io.muster.proto.tf.DataType;
import io.muster.proto.tf.Event;
import io.muster.proto.tf.Summary;
import io.muster.proto.tf.TensorProto;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/** Reading event files back: every event, or the scalars in them (TensorFlow 2 tensors and older {@code simple_value}s). */
public final class EventFiles {

  /** One scalar summary value. */
  public record Scalar(long step, String tag, double value, double wallTime) {}

  /**
   * What a file holds up to its first unreadable record: the intact events before it, and why
   * reading stopped there, if it did ({@link TfRecordReader.TruncatedRecordException} when the
   * file ends inside its last record, as when the writer died mid-write; anything else is
   * corruption).
   */
  public record Contents(List<Event> events, Optional<IOException> stop) {
    public Contents {
      events = List.copyOf(events);
    }

    /** The file ends inside its last record (TensorBoard reads such a file up to that record). */
    public boolean truncated() {
      return stop.isPresent() && stop.get() instanceof TfRecordReader.TruncatedRecordException;
    }

    /** A record before the end is unreadable: a CRC mismatch, an implausible length, or not an Event. */
    public boolean corrupt() {
      return stop.isPresent() && !truncated();
    }

    /** The scalars of the intact events, in file order. */
    public List<Scalar> scalars() {
      return scalarsOf(events);
    }
  }

  private EventFiles() {}

  /** Every event of a file, CRCs checked; a truncated last record is an error, not the end. */
  public static List<Event> read(FileSystem fs, Path file) throws IOException {
    Contents contents = readIntact(fs, file);
    if (contents.stop().isPresent()) {
      throw contents.stop().get();
    }
    return contents.events();
  }

  /**
   * The events of a file up to its first unreadable record, and why reading stopped there; an
   * error opening or reading the file itself is thrown.
   */
  public static Contents readIntact(FileSystem fs, Path file) throws IOException {
    List<Event> events = new ArrayList<>();
    try (TfRecordReader reader = new TfRecordReader(fs.open(file), file.toString())) {
      while (true) {
        Optional<byte[]> record;
        try {
          record = reader.next();
        } catch (TfRecordReader.TruncatedRecordException | TfRecordReader.CorruptRecordException e) {
          return new Contents(events, Optional.of(e));
        }
        if (record.isEmpty()) {
          return new Contents(events, Optional.empty());
        }
        try {
          events.add(Event.parseFrom(record.get()));
        } catch (InvalidProtocolBufferException e) {
          return new Contents(events, Optional.of(new IOException(file + ": record " + (events.size() + 1)
              + " is not an Event: " + e.getMessage(), e)));
        }
      }
    }
  }

  /** The scalars of a file, in file order. */
  public static List<Scalar> scalars(FileSystem fs, Path file) throws IOException {
    return scalarsOf(read(fs, file));
  }

  private static List<Scalar> scalarsOf(List<Event> events) {
    List<Scalar> out = new ArrayList<>();
    for (Event event : events) {
      for (Summary.Value v : event.getSummary().getValueList()) {
        scalarOf(v).ifPresent(x -> out.add(new Scalar(event.getStep(), v.getTag(), x, event.getWallTime())));
      }
    }
    return out;
  }

  private static Optional<Double> scalarOf(Summary.Value v) {
    if (v.getValueCase() == Summary.Value.ValueCase.SIMPLE_VALUE) {
      return Optional.of((double) v.getSimpleValue());
    }
    if (v.getValueCase() != Summary.Value.ValueCase.TENSOR || v.getTensor().getTensorShape().getDimCount() != 0) {
      return Optional.empty();
    }
    TensorProto t = v.getTensor();
    ByteBuffer content = t.getTensorContent().asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
    if (t.getDtype() == DataType.DT_FLOAT) {
      return Optional.ofNullable(content.remaining() >= 4 ? (double) content.getFloat(0)
          : t.getFloatValCount() > 0 ? (double) t.getFloatVal(0) : null);
    }
    if (t.getDtype() == DataType.DT_DOUBLE) {
      return Optional.ofNullable(content.remaining() >= 8 ? content.getDouble(0)
          : t.getDoubleValCount() > 0 ? t.getDoubleVal(0) : null);
    }
    return Optional.empty();
  }
}
