package io.muster.summary;

import com.google.protobuf.ByteString;
import io.muster.checkpoint.WritePolicy;
import io.muster.data.TfRecordWriter;
import io.muster.proto.tf.DataClass;
import io.muster.proto.tf.DataType;
import io.muster.proto.tf.Event;
import io.muster.proto.tf.Summary;
import io.muster.proto.tf.SummaryMetadata;
import io.muster.proto.tf.TensorProto;
import io.muster.proto.tf.TensorShapeProto;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * TensorBoard event files as TensorFlow 2's {@code tf.summary.create_file_writer} writes them:
 * {@code events.out.tfevents.<10-digit seconds>.<host>.<pid>.<n>.v2}, TFRecord framing with masked
 * CRC32C, a first {@code brain.Event:2} record flushed at once, then scalars as float32 tensors
 * with the {@code scalars} plugin's metadata. Events are queued and flushed when more than
 * {@code maxQueue} are waiting, every {@code flushInterval}, and on {@link #close()}.
 *
 * <p>Only the chief writes to the log directory itself; other tasks write to their
 * {@code workertemp_<i>} directory, deleted on close (Keras' TensorBoard callback does the same).
 */
public final class SummaryWriter implements AutoCloseable {

  /** TensorFlow's defaults: {@code max_queue=10}, {@code flush_millis=120000}. */
  public record Options(int maxQueue, Duration flushInterval) {
    public static final Options DEFAULTS = new Options(10, Duration.ofMinutes(2));

    public Options {
      if (maxQueue < 0) {
        throw new IllegalArgumentException("maxQueue must be >= 0, was " + maxQueue);
      }
      if (flushInterval.isNegative() || flushInterval.isZero()) {
        throw new IllegalArgumentException("flushInterval must be > 0, was " + flushInterval);
      }
    }
  }

  private static final Logger log = LoggerFactory.getLogger(SummaryWriter.class);
  private static final AtomicInteger FILE_COUNTER = new AtomicInteger();

  private final FileSystem fs;
  private final Path logDir;
  private final WritePolicy policy;
  private final Path file;
  private final FSDataOutputStream stream;
  private final TfRecordWriter records;
  private final Options options;
  private final List<Event> queue = new ArrayList<>();
  private final ScheduledExecutorService flusher;
  private boolean closed;

  private SummaryWriter(FileSystem fs, Path logDir, WritePolicy policy, Options options) throws IOException {
    this.fs = fs instanceof LocalFileSystem local ? local.getRawFileSystem() : fs;
    this.logDir = logDir;
    this.policy = policy;
    this.options = options;
    Path dir = policy.writeDir(this.fs, logDir);
    this.fs.mkdirs(dir);
    long seconds = System.currentTimeMillis() / 1000;
    this.file = new Path(dir, String.format("events.out.tfevents.%010d.%s.%d.%d.v2", seconds, hostname(),
        ProcessHandle.current().pid(), FILE_COUNTER.getAndIncrement()));
    this.stream = this.fs.create(file, false);
    this.records = new TfRecordWriter(stream);
    records.write(Event.newBuilder().setWallTime(seconds).setFileVersion("brain.Event:2").build().toByteArray());
    stream.hflush();
    this.flusher = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "muster-summary-flush");
      t.setDaemon(true);
      return t;
    });
    long period = options.flushInterval().toMillis();
    flusher.scheduleWithFixedDelay(this::flushQuietly, period, period, TimeUnit.MILLISECONDS);
  }

  /** A writer for {@code logDir} (a TensorBoard run directory), created with its parents. */
  public static SummaryWriter create(FileSystem fs, Path logDir, WritePolicy policy, Options options) throws IOException {
    return new SummaryWriter(fs, logDir, policy, options);
  }

  public Path file() {
    return file;
  }

  /** A scalar, as {@code tf.summary.scalar(tag, value, step)} writes it. */
  public synchronized void scalar(String tag, double value, long step) throws IOException {
    ByteBuffer content = ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putFloat(0, (float) value);
    Summary.Value summary = Summary.Value.newBuilder()
        .setTag(tag)
        .setMetadata(SummaryMetadata.newBuilder()
            .setPluginData(SummaryMetadata.PluginData.newBuilder().setPluginName("scalars"))
            .setDataClass(DataClass.DATA_CLASS_SCALAR))
        .setTensor(TensorProto.newBuilder().setDtype(DataType.DT_FLOAT)
            .setTensorShape(TensorShapeProto.getDefaultInstance())
            .setTensorContent(ByteString.copyFrom(content.array())))
        .build();
    write(Event.newBuilder().setStep(step).setWallTime(System.currentTimeMillis() / 1000.0)
        .setSummary(Summary.newBuilder().addValue(summary)).build());
  }

  private void write(Event event) throws IOException {
    if (closed) {
      throw new IllegalStateException("summary writer for " + file + " is closed");
    }
    queue.add(event);
    if (queue.size() > options.maxQueue()) {
      flush();
    }
  }

  /** Writes every queued event and makes it visible to readers. */
  public synchronized void flush() throws IOException {
    if (closed && queue.isEmpty()) {
      return;
    }
    for (Event e : queue) {
      records.write(e.toByteArray());
    }
    queue.clear();
    stream.hflush();
  }

  private void flushQuietly() {
    try {
      flush();
    } catch (IOException | RuntimeException e) {
      log.warn("could not flush summaries to {}: {}", file, e.toString());
    }
  }

  /** Flushes, closes the file, and on a non-chief task deletes its temp directory. */
  @Override
  public synchronized void close() throws IOException {
    if (closed) {
      return;
    }
    flusher.shutdownNow();
    try {
      flush();
      records.close();
    } finally {
      closed = true;
      policy.removeTempDir(fs, logDir);
    }
  }

  private static String hostname() {
    try {
      return InetAddress.getLocalHost().getHostName();
    } catch (IOException e) {
      return "localhost";
    }
  }
}
