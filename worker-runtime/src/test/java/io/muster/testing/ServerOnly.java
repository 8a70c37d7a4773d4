package io.muster.testing;

import io.grpc.stub.StreamObserver;
import io.muster.cluster.HostPort;
import io.muster.cluster.TfConfig;
import io.muster.proto.coordination.CoordinationServiceGrpc;
import io.muster.proto.coordination.RegisterTaskRequest;
import io.muster.proto.coordination.RegisterTaskResponse;
import io.muster.rpc.Security;
import io.muster.rpc.TaskServer;

/**
 * A task in a child JVM that has bound its server but does not run the coordination service yet
 * (as a launcher's task before the address exchange): every coordination call is answered
 * UNIMPLEMENTED, and each registration attempt prints REGISTER-ATTEMPT. Prints READY, then waits
 * until its standard input closes.
 */
public final class ServerOnly {
  public static void main(String[] args) throws Exception {
    TfConfig config = TfConfig.fromEnvironment(System.getenv());
    try (TaskServer server = TaskServer.start(config.requireTask(),
        HostPort.parse(config.cluster().taskAddress(config.requireTask())), Security.fromEnvironment(System.getenv()))) {
      server.addService(new CoordinationServiceGrpc.CoordinationServiceImplBase() {
        @Override
        public void registerTask(RegisterTaskRequest request, StreamObserver<RegisterTaskResponse> response) {
          System.out.println("REGISTER-ATTEMPT");
          System.out.flush();
          super.registerTask(request, response); // UNIMPLEMENTED
        }
      });
      System.out.println("READY");
      System.out.flush();
      while (System.in.read() >= 0) {
        // wait for the parent to close our stdin
      }
    }
  }
}
