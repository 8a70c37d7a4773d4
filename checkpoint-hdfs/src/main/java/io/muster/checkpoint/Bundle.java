package io.muster.checkpoint;

import io.muster.internal.Crc32c;
import io.muster.proto.tf.BundleHeaderProto;
import io.muster.proto.tf.VersionDef;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.apache.hadoop.fs.Path;

/**
 * TensorFlow's V2 checkpoint format ("tensor bundle"): {@code P.data-00000-of-00001} with the tensor
 * bytes in the order given, and {@code P.index}, a sorted table of one header and one entry per
 * tensor. {@link BundleWriter} writes it byte for byte as TensorFlow's {@code SaveV2} does;
 * {@link BundleReader} reads it as {@code RestoreV2} does, with every CRC checked. This class holds
 * what both share: the file names, the header, the CRC of a string tensor.
 */
public final class Bundle {
  /** The header entry under the empty key: one shard, producer version 1. */
  static final byte[] HEADER = BundleHeaderProto.newBuilder().setNumShards(1)
      .setVersion(VersionDef.newBuilder().setProducer(1)).build().toByteArray();

  private Bundle() {}

  public static Path indexFile(Path prefix) {
    return new Path(prefix.getParent(), prefix.getName() + ".index");
  }

  public static Path dataFile(Path prefix, int shard, int shards) {
    return new Path(prefix.getParent(), String.format("%s.data-%05d-of-%05d", prefix.getName(), shard, shards));
  }

  /** The entry CRC of an encoded string tensor: the lengths as 4-byte ints, the stored length CRC, the bytes. */
  static int stringsCrc(byte[] encoded, int count) {
    ByteBuffer in = ByteBuffer.wrap(encoded);
    ByteBuffer crcInput = ByteBuffer.allocate(4 * count + encoded.length).order(ByteOrder.LITTLE_ENDIAN);
    try {
      for (int i = 0; i < count; i++) {
        crcInput.putInt((int) Table.getVarint(in));
      }
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
    crcInput.put(encoded, in.position(), encoded.length - in.position());
    return Crc32c.of(crcInput.array(), 0, crcInput.position());
  }
}
