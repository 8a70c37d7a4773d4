package io.muster.ps;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.muster.proto.ps.Chunk;
import io.muster.proto.ps.CreateVariableRequest;
import io.muster.proto.ps.CreateVariableResponse;
import io.muster.proto.ps.GatherRequest;
import io.muster.proto.ps.ParameterServerGrpc;
import io.muster.proto.ps.ReadRequest;
import io.muster.proto.ps.UpdateRequest;
import io.muster.proto.ps.UpdateResponse;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The variables one ps task hosts, served to the coordinator and the workers. Every update of a
 * variable is applied whole, under the variable's lock, once its last chunk has arrived; reads send
 * a consistent copy in chunks as fast as the caller takes them.
 */
public final class ParameterServerService extends ParameterServerGrpc.ParameterServerImplBase {

  private static final Logger log = LoggerFactory.getLogger(ParameterServerService.class);

  /** The calls that never wait and carry at most one chunk: they may run on the transport's thread. */
  public static final java.util.Set<String> NON_BLOCKING_METHODS = java.util.Set.of("Create", "ReadSmall",
      "GatherSmall", "UpdateSmall");

  private final String task;
  private final Map<String, HostedVariable> variables = new ConcurrentHashMap<>();

  /** @param task this ps task, as errors name it */
  public ParameterServerService(String task) {
    this.task = task;
  }

  /** The names of the variables hosted here. */
  public List<String> variableNames() {
    return variables.keySet().stream().sorted().toList();
  }

  @Override
  public void create(CreateVariableRequest request, StreamObserver<CreateVariableResponse> response) {
    long[] shape = request.getShapeList().stream().mapToLong(Long::longValue).toArray();
    try {
      Optimizer optimizer = Optimizer.fromProto(request.getOptimizer());
      boolean[] created = new boolean[1];
      HostedVariable variable = variables.computeIfAbsent(request.getName(), name -> {
        created[0] = true;
        return new HostedVariable(name, shape, optimizer);
      });
      if (!variable.sameKind(shape, optimizer)) {
        throw Status.ALREADY_EXISTS.withDescription(task + " already hosts variable " + request.getName()
            + " with shape " + Arrays.toString(variable.shape()) + " and optimizer " + variable.optimizer()
            + "; asked for shape " + Arrays.toString(shape) + " and " + optimizer).asRuntimeException();
      }
      if (created[0]) {
        log.debug("{}: created variable {} of shape {}", task, request.getName(), Arrays.toString(shape));
      }
      response.onNext(CreateVariableResponse.newBuilder().setCreated(created[0]).build());
      response.onCompleted();
    } catch (IllegalArgumentException e) {
      response.onError(Status.INVALID_ARGUMENT.withDescription(task + ": " + e.getMessage()).asRuntimeException());
    } catch (StatusRuntimeException e) {
      response.onError(e);
    }
  }

  @Override
  public void read(ReadRequest request, StreamObserver<Chunk> response) {
    try {
      send(lookup(request.getName()).read(), response);
    } catch (StatusRuntimeException e) {
      response.onError(e);
    }
  }

  @Override
  public void gather(GatherRequest request, StreamObserver<Chunk> response) {
    try {
      long[] rows = request.getRowsList().stream().mapToLong(Long::longValue).toArray();
      send(lookup(request.getName()).gather(rows), response);
    } catch (IllegalArgumentException e) {
      response.onError(Status.INVALID_ARGUMENT.withDescription(task + ": " + e.getMessage()).asRuntimeException());
    } catch (StatusRuntimeException e) {
      response.onError(e);
    }
  }

  @Override
  public void readSmall(ReadRequest request, StreamObserver<Chunk> response) {
    try {
      reply(lookup(request.getName()).read(), response);
    } catch (StatusRuntimeException e) {
      response.onError(e);
    }
  }

  @Override
  public void gatherSmall(GatherRequest request, StreamObserver<Chunk> response) {
    try {
      long[] rows = request.getRowsList().stream().mapToLong(Long::longValue).toArray();
      reply(lookup(request.getName()).gather(rows), response);
    } catch (IllegalArgumentException e) {
      response.onError(Status.INVALID_ARGUMENT.withDescription(task + ": " + e.getMessage()).asRuntimeException());
    } catch (StatusRuntimeException e) {
      response.onError(e);
    }
  }

  @Override
  public void updateSmall(UpdateRequest request, StreamObserver<UpdateResponse> response) {
    StreamObserver<UpdateRequest> update = update(response);
    update.onNext(request);
    update.onCompleted();
  }

  @Override
  public StreamObserver<UpdateRequest> update(StreamObserver<UpdateResponse> response) {
    return new StreamObserver<>() {
      private HostedVariable variable;
      private UpdateRequest.Op op;
      private long[] rows;
      private Payloads.Assembler payload;
      private boolean failed;

      @Override
      public void onNext(UpdateRequest request) {
        if (failed) {
          return;
        }
        try {
          if (variable == null) {
            variable = lookup(request.getName());
            op = request.getOp();
            rows = request.getRowsList().stream().mapToLong(Long::longValue).toArray();
            long floats = op == UpdateRequest.Op.SCATTER_ADD ? (long) rows.length * variable.rowLength() : variable.size();
            if (floats > Integer.MAX_VALUE - 8) {
              throw new IllegalArgumentException("a scatter-add of " + rows.length + " rows is too large; split it");
            }
            payload = new Payloads.Assembler((int) floats, op + " on variable " + request.getName());
          }
          payload.add(request.getData());
        } catch (IllegalArgumentException e) {
          fail(Status.INVALID_ARGUMENT.withDescription(task + ": " + e.getMessage()).asRuntimeException());
        } catch (StatusRuntimeException e) {
          fail(e);
        }
      }

      @Override
      public void onError(Throwable t) {
        // The caller went away mid-stream: nothing was applied.
        failed = true;
      }

      @Override
      public void onCompleted() {
        if (failed) {
          return;
        }
        if (variable == null) {
          fail(Status.INVALID_ARGUMENT.withDescription(task + ": an update stream with no request").asRuntimeException());
          return;
        }
        try {
          float[] data = payload.complete();
          long version = switch (op) {
            case ASSIGN -> variable.assign(data);
            case ASSIGN_ADD -> variable.assignAdd(data);
            case APPLY_GRADIENT -> variable.applyGradient(data);
            case SCATTER_ADD -> variable.scatterAdd(rows, data);
            case UNRECOGNIZED -> throw new IllegalArgumentException("unknown update operation");
          };
          response.onNext(UpdateResponse.newBuilder().setVersion(version).build());
          response.onCompleted();
        } catch (IllegalArgumentException e) {
          fail(Status.INVALID_ARGUMENT.withDescription(task + ": " + e.getMessage()).asRuntimeException());
        } catch (IllegalStateException e) {
          fail(Status.FAILED_PRECONDITION.withDescription(task + ": " + e.getMessage()).asRuntimeException());
        }
      }

      private void fail(StatusRuntimeException e) {
        failed = true;
        response.onError(e);
      }
    };
  }

  private HostedVariable lookup(String name) {
    HostedVariable variable = variables.get(name);
    if (variable == null) {
      throw Status.NOT_FOUND.withDescription(task + " hosts no variable " + name + " (it hosts "
          + variableNames() + "); the coordinator creates variables before workers use them").asRuntimeException();
    }
    return variable;
  }

  /** Answers in one message: the caller chose the unary call because the values fit in one chunk. */
  private void reply(HostedVariable.Snapshot snapshot, StreamObserver<Chunk> response) {
    List<com.google.protobuf.ByteString> chunks = Payloads.chunks(snapshot.values());
    if (chunks.size() != 1) {
      response.onError(Status.OUT_OF_RANGE.withDescription(task + ": " + snapshot.values().length + " values do not fit "
          + "in one message; read them with the streaming call").asRuntimeException());
      return;
    }
    response.onNext(chunk(chunks.get(0), snapshot.version()));
    response.onCompleted();
  }

  /** Sends the chunks while the transport is ready for more, so a slow reader holds no extra copies. */
  private static void send(HostedVariable.Snapshot snapshot, StreamObserver<Chunk> response) {
    Iterator<com.google.protobuf.ByteString> chunks = Payloads.chunks(snapshot.values()).iterator();
    ServerCallStreamObserver<Chunk> call = (ServerCallStreamObserver<Chunk>) response;
    boolean[] first = {true};
    boolean[] done = {false};
    Runnable drain = () -> {
      synchronized (done) {
        while (!done[0] && call.isReady() && chunks.hasNext()) {
          call.onNext(chunk(chunks.next(), first[0] ? snapshot.version() : 0));
          first[0] = false;
        }
        if (!done[0] && !chunks.hasNext()) {
          done[0] = true;
          call.onCompleted();
        }
      }
    };
    call.setOnReadyHandler(drain);
    drain.run();
  }

  private static Chunk chunk(com.google.protobuf.ByteString data, long version) {
    return Chunk.newBuilder().setData(data).setVersion(version).build();
  }
}
