package io.muster.testing;

import io.grpc.stub.StreamObserver;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.proto.coordination.CoordinationServiceGrpc;
import io.muster.proto.coordination.RegisterTaskRequest;
import io.muster.proto.coordination.RegisterTaskResponse;
import io.muster.rpc.Security;
import io.muster.internal.rpc.TaskServer;

/**
 * A task in a child JVM that has bound its server but does not run the coordination service yet
 * (as a launcher's task before the address exchange): every coordination call is answered
 * UNIMPLEMENTED, and each registration attempt prints REGISTER-ATTEMPT. It binds port 0 and prints
 * {@code BOUND host:port} (no port is reserved and released), then READY, then waits until its
 * standard input closes. Arguments: job index.
 */
public final class ServerOnly {
  public static void main(String[] args) throws Exception {
    TaskId task = new TaskId(args[0], Integer.parseInt(args[1]));
    try (TaskServer server = TaskServer.start(task, new HostPort("127.0.0.1", 0), Security.fromEnvironment(System.getenv()))) {
      System.out.println("BOUND " + server.address());
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
