package io.muster.launch;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.muster.cluster.HostPort;
import io.muster.cluster.TaskType;
import io.muster.collective.CommunicationOptions;
import io.muster.coordination.CoordinationOptions;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** What a launcher ships to its tasks (Spark serializes it into every task) arrives whole. */
class OptionsTravelTest {

  @SuppressWarnings("unchecked")
  private static <T> T roundTrip(T value) throws Exception {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    try (ObjectOutputStream out = new ObjectOutputStream(bytes)) {
      out.writeObject(value);
    }
    try (ObjectInputStream in = new ObjectInputStream(new ByteArrayInputStream(bytes.toByteArray()))) {
      return (T) in.readObject();
    }
  }

  @Test
  void optionsGangSpecsAndGangsSurviveJavaSerializationUnchanged() throws Exception {
    CoordinationOptions coordination = CoordinationOptions.DEFAULTS.withHeartbeatTimeout(Duration.ofMillis(1500))
        .withJoinTimeout(Duration.ofSeconds(42)).withShutdownBarrierTimeout(Duration.ofMinutes(1));
    assertEquals(coordination, roundTrip(coordination));
    CommunicationOptions communication = CommunicationOptions.DEFAULTS
        .withImplementation(CommunicationOptions.Implementation.RING).withBytesPerPack(1 << 20)
        .withTimeout(Duration.ofSeconds(7));
    assertEquals(communication, roundTrip(communication));
    assertEquals(CommunicationOptions.DEFAULTS, roundTrip(CommunicationOptions.DEFAULTS));
    GangSpec spec = new GangSpec(1, 2, 1, 1, Set.of(TaskType.PS));
    assertEquals(spec, roundTrip(spec));
    Gang gang = GangSpec.workers(2).formed(List.of(new HostPort("::1", 1), new HostPort("h", 2)));
    assertEquals(gang, roundTrip(gang));
  }
}
