package io.muster.spark;

import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import io.muster.rpc.TlsMaterial;
import java.io.IOException;
import java.io.Serializable;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;

/**
 * What every task of one gang run takes from the driver, in its closure: where the driver's gang
 * endpoint listens ({@link DriverGang}), the run's job token, the job's TLS material when the driver
 * has {@code MUSTER_TLS_*}, and the run's attempt and gang timeout.
 *
 * @param tls the TLS material, or null without TLS
 * @param allGather whether the tasks take each other's addresses from Spark's {@code allGather}
 *     instead of the driver ({@value BarrierTrainer#RENDEZVOUS})
 */
record DriverLink(String address, String token, TlsMaterial tls, int attempt, Duration gangTimeout,
    boolean allGather) implements Serializable {

  /** The run's security in a task: the token, and TLS with the material written into {@code dir} (private). */
  Security security(Path dir) throws IOException {
    return new Security(JobToken.of(token), tls == null ? Optional.empty() : Optional.of(tls.writeTo(dir)));
  }
}
