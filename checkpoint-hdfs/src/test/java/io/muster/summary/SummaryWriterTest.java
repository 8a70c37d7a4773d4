package io.muster.summary;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.checkpoint.WritePolicy;
import io.muster.data.TfRecordReader;
import io.muster.data.TfRecordWriter;
import io.muster.proto.tf.Event;
import io.muster.proto.tf.Summary;
import java.io.ByteArrayOutputStream;
import java.nio.file.Files;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SummaryWriterTest {

  @TempDir
  java.nio.file.Path tmp;

  private FileSystem fs() throws Exception {
    return FileSystem.getLocal(new Configuration()).getRawFileSystem();
  }

  private Path logDir() {
    return new Path(tmp.toUri().toString(), "logs/train");
  }

  @Test
  void firstRecordIsTensorFlowsBytes() throws Exception {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    new TfRecordWriter(out).write(Event.newBuilder().setWallTime(1700000000).setFileVersion("brain.Event:2").build()
        .toByteArray());
    assertEquals("1800000000000000a37f4b220900000040fc54d9411a0d627261696e2e4576656e743a32eced8f9d",
        HexFormat.of().formatHex(out.toByteArray()));
  }

  @Test
  void scalarsAreWrittenAsTensorFlow2DoesAndReadBack() throws Exception {
    try (SummaryWriter writer = SummaryWriter.create(fs(), logDir(), WritePolicy.SINGLE_WORKER, SummaryWriter.Options.DEFAULTS)) {
      assertTrue(writer.file().getName().matches("events\\.out\\.tfevents\\.\\d{10}\\..+\\.\\d+\\.\\d+\\.v2"),
          writer.file().getName());
      writer.scalar("epoch_loss", 0.5, 1);
      writer.scalar("epoch_accuracy", 0.75, 1);
      writer.scalar("epoch_loss", 0.25, 2);
    }
    Path file = fs().listStatus(logDir())[0].getPath();
    List<Event> events = EventFiles.read(fs(), file);
    assertEquals("brain.Event:2", events.get(0).getFileVersion());
    assertEquals(Math.floor(events.get(0).getWallTime()), events.get(0).getWallTime());
    Summary.Value v = events.get(1).getSummary().getValue(0);
    assertEquals("scalars", v.getMetadata().getPluginData().getPluginName());
    assertEquals(0, v.getTensor().getTensorShape().getDimCount());
    assertEquals(4, v.getTensor().getTensorContent().size());
    assertEquals(List.of(new EventFiles.Scalar(1, "epoch_loss", 0.5, events.get(1).getWallTime()),
        new EventFiles.Scalar(1, "epoch_accuracy", 0.75, events.get(2).getWallTime()),
        new EventFiles.Scalar(2, "epoch_loss", 0.25, events.get(3).getWallTime())), EventFiles.scalars(fs(), file));
  }

  @Test
  void eventsAreFlushedWhenMoreThanMaxQueueWait() throws Exception {
    try (SummaryWriter writer = SummaryWriter.create(fs(), logDir(), WritePolicy.SINGLE_WORKER,
        new SummaryWriter.Options(10, Duration.ofHours(1)))) {
      for (int i = 0; i < 10; i++) {
        writer.scalar("x", i, i);
      }
      assertEquals(0, EventFiles.scalars(fs(), writer.file()).size(), "10 queued, none written yet");
      writer.scalar("x", 10, 10);
      assertEquals(11, EventFiles.scalars(fs(), writer.file()).size(), "more than max_queue: flushed");
    }
  }

  @Test
  void eventsAreFlushedOnTime() throws Exception {
    try (SummaryWriter writer = SummaryWriter.create(fs(), logDir(), WritePolicy.SINGLE_WORKER,
        new SummaryWriter.Options(10, Duration.ofMillis(200)))) {
      writer.scalar("x", 1, 1);
      long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
      while (EventFiles.scalars(fs(), writer.file()).isEmpty() && System.nanoTime() < deadline) {
        Thread.sleep(50);
      }
      assertEquals(1, EventFiles.scalars(fs(), writer.file()).size(), "flushed by time");
    }
  }

  @Test
  void aNonChiefWritesToItsTempDirWhichIsGoneAfterClose() throws Exception {
    Path file;
    try (SummaryWriter writer = SummaryWriter.create(fs(), logDir(), new WritePolicy(false, 2), SummaryWriter.Options.DEFAULTS)) {
      file = writer.file();
      assertEquals(new Path(logDir(), "workertemp_2"), file.getParent());
      writer.scalar("x", 1, 1);
    }
    assertFalse(fs().exists(file.getParent()));
  }

  @Test
  void aTruncatedLastRecordIsReportedNotSwallowed() throws Exception {
    Path file;
    try (SummaryWriter writer = SummaryWriter.create(fs(), logDir(), WritePolicy.SINGLE_WORKER, SummaryWriter.Options.DEFAULTS)) {
      writer.scalar("x", 1, 1);
      file = writer.file();
    }
    java.nio.file.Path local = java.nio.file.Path.of(file.toUri());
    byte[] bytes = Files.readAllBytes(local);
    Files.write(local, java.util.Arrays.copyOf(bytes, bytes.length - 3));
    TfRecordReader.TruncatedRecordException e = assertThrows(TfRecordReader.TruncatedRecordException.class,
        () -> EventFiles.read(fs(), file));
    assertTrue(e.getMessage().contains("truncated record at offset"), e.getMessage());
    bytes[bytes.length - 10] ^= 0x40;
    Files.write(local, bytes);
    assertThrows(TfRecordReader.CorruptRecordException.class, () -> EventFiles.read(fs(), file));
  }

  @Test
  void olderSimpleValueScalarsAreRead() throws Exception {
    java.nio.file.Path local = tmp.resolve("events.out.tfevents.1700000000.host.1.0");
    try (TfRecordWriter w = new TfRecordWriter(Files.newOutputStream(local))) {
      w.write(Event.newBuilder().setWallTime(1700000000).setFileVersion("brain.Event:2").build().toByteArray());
      w.write(Event.newBuilder().setStep(7).setSummary(Summary.newBuilder()
          .addValue(Summary.Value.newBuilder().setTag("loss").setSimpleValue(1.5f))).build().toByteArray());
    }
    assertEquals(List.of(new EventFiles.Scalar(7, "loss", 1.5, 0)), EventFiles.scalars(fs(), new Path(local.toUri())));
  }
}
