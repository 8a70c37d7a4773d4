package io.muster.coordinator;

import io.grpc.stub.StreamObserver;
import io.muster.proto.coordinator.ClosureWorkerGrpc;
import io.muster.proto.coordinator.CreateResourceRequest;
import io.muster.proto.coordinator.CreateResourceResponse;
import io.muster.proto.coordinator.PingRequest;
import io.muster.proto.coordinator.PingResponse;
import io.muster.proto.coordinator.RunRequest;
import io.muster.proto.coordinator.RunResponse;
import io.muster.cluster.TaskId;
import io.muster.ps.ParameterServerUnavailableException;
import io.muster.ps.ParameterServers;
import java.util.List;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What a worker of a parameter-server job serves to the coordinator: it runs registered functions
 * and creates per-worker resources by name. A function's exception is answered as the user's error
 * (or as a ps failure when a parameter server did not answer), never as a failure of the call, so
 * the coordinator can tell a broken function from a dead worker.
 */
public final class ClosureWorkerService extends ClosureWorkerGrpc.ClosureWorkerImplBase {

  private static final Logger log = LoggerFactory.getLogger(ClosureWorkerService.class);

  private final Functions functions;
  private final WorkerContext context;
  private final LongSupplier incarnation;

  /**
   * @param variables the job's variables, as functions on this worker reach them
   * @param incarnation this worker's coordination-service incarnation, so the coordinator can tell
   *     a restarted worker (whose resources are gone) from one that only stopped answering
   */
  public ClosureWorkerService(TaskId task, Functions functions, ParameterServers variables, LongSupplier incarnation) {
    this.functions = functions;
    this.context = new WorkerContext(task, variables);
    this.incarnation = incarnation;
  }

  @Override
  public void run(RunRequest request, StreamObserver<RunResponse> response) {
    RunResponse.Builder answer = RunResponse.newBuilder();
    try {
      RemoteFunction function = functions.function(request.getFunction()).orElseThrow(() -> new IllegalArgumentException(
          "no function " + request.getFunction() + " is registered on " + context.task() + " (registered: "
              + functions.functionNames() + "); register the same functions on every task"));
      List<Value> args = request.getArgsList().stream().map(Value::fromProto).toList();
      Value result = function.call(context, args);
      answer.setResult((result == null ? Value.NONE : result).toProto());
    } catch (ParameterServerUnavailableException e) {
      answer.setError(e.getMessage()).setErrorKind("ps").setPsTask(e.ps().index());
    } catch (Exception e) {
      log.warn("{}: function {} failed: {}", context.task(), request.getFunction(), e.toString());
      log.debug("{}: function {} failed", context.task(), request.getFunction(), e);
      answer.setError(e.toString()).setErrorKind("user");
    }
    response.onNext(answer.build());
    response.onCompleted();
  }

  @Override
  public void createResource(CreateResourceRequest request, StreamObserver<CreateResourceResponse> response) {
    CreateResourceResponse.Builder answer = CreateResourceResponse.newBuilder();
    try {
      ResourceFunction factory = functions.resource(request.getFunction()).orElseThrow(() -> new IllegalArgumentException(
          "no resource function " + request.getFunction() + " is registered on " + context.task() + " (registered: "
              + functions.resourceNames() + ")"));
      List<Value> args = request.getArgsList().stream().map(Value::fromProto).toList();
      context.putResource(request.getResource(), factory.create(context, args));
    } catch (Exception e) {
      log.warn("{}: resource function {} failed: {}", context.task(), request.getFunction(), e.toString());
      answer.setError(e.toString());
    }
    response.onNext(answer.build());
    response.onCompleted();
  }

  @Override
  public void ping(PingRequest request, StreamObserver<PingResponse> response) {
    response.onNext(PingResponse.newBuilder().setIncarnation(incarnation.getAsLong()).build());
    response.onCompleted();
  }
}
