package io.muster.ps;

import com.google.protobuf.ByteString;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import io.muster.cluster.TaskId;
import io.muster.internal.Durations;
import io.muster.proto.ps.Chunk;
import io.muster.proto.ps.GatherRequest;
import io.muster.proto.ps.ParameterServerGrpc;
import io.muster.proto.ps.ReadRequest;
import io.muster.proto.ps.UpdateRequest;
import io.muster.proto.ps.UpdateResponse;
import java.time.Duration;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import java.util.stream.LongStream;

/**
 * A float32 variable that lives on parameter servers, whole on one ps or split along dimension 0
 * into shards on several (TensorFlow's {@code ShardedVariable}). Every operation goes to the ps
 * tasks holding it; each shard's update is atomic on its ps, so concurrent updates from many
 * workers all land. Values are row-major. Handles are cheap and thread-safe; get them from
 * {@link ParameterServers}. Any operation throws {@link ParameterServerUnavailableException} when a ps
 * does not answer.
 */
public final class Variable {

  /** One shard: its name on its ps, the ps, and the rows of the whole variable it holds. */
  public record Shard(String name, TaskId ps, long firstRow, long rows) {}

  private final String name;
  private final long[] shape;
  private final List<Shard> shards;
  private final Function<TaskId, ParameterServerGrpc.ParameterServerStub> stubs;
  private final Duration timeout;
  private final int rowLength;

  Variable(String name, long[] shape, List<Shard> shards, Function<TaskId, ParameterServerGrpc.ParameterServerStub> stubs,
      Duration timeout) {
    this.name = name;
    this.shape = shape.clone();
    this.shards = List.copyOf(shards);
    this.stubs = stubs;
    this.timeout = timeout;
    this.rowLength = HostedVariable.rowLength(shape);
  }

  public String name() {
    return name;
  }

  public long[] shape() {
    return shape.clone();
  }

  /** The number of float32 values. */
  public int size() {
    return (int) HostedVariable.elements(shape);
  }

  public List<Shard> shards() {
    return shards;
  }

  /** The whole variable. */
  public float[] read() {
    float[] out = new float[size()];
    for (Shard shard : shards) {
      int length = (int) (shard.rows() * rowLength);
      ReadRequest request = ReadRequest.newBuilder().setName(shard.name()).build();
      float[] part = receive(shard, length, "read", observer -> {
        if (fitsOneChunk(length)) {
          stub(shard).readSmall(request, observer);
        } else {
          stub(shard).read(request, observer);
        }
      });
      System.arraycopy(part, 0, out, (int) (shard.firstRow() * rowLength), length);
    }
    return out;
  }

  /** The rows asked for, in that order ({@code rows.length × row length} values). */
  public float[] gather(long... rows) {
    float[] out = new float[rows.length * rowLength];
    for (Shard shard : shards) {
      int[] mine = positionsIn(shard, rows);
      if (mine.length == 0) {
        continue;
      }
      GatherRequest.Builder request = GatherRequest.newBuilder().setName(shard.name());
      for (int i : mine) {
        request.addRows(rows[i] - shard.firstRow());
      }
      float[] part = receive(shard, mine.length * rowLength, "gather", observer -> {
        if (fitsOneChunk(mine.length * rowLength)) {
          stub(shard).gatherSmall(request.build(), observer);
        } else {
          stub(shard).gather(request.build(), observer);
        }
      });
      for (int j = 0; j < mine.length; j++) {
        System.arraycopy(part, j * rowLength, out, mine[j] * rowLength, rowLength);
      }
    }
    return out;
  }

  public void assign(float[] values) {
    dense(UpdateRequest.Op.ASSIGN, values);
  }

  public void assignAdd(float[] delta) {
    dense(UpdateRequest.Op.ASSIGN_ADD, delta);
  }

  /** One step of the variable's server-side {@link Optimizer} with this gradient. */
  public void applyGradient(float[] gradient) {
    dense(UpdateRequest.Op.APPLY_GRADIENT, gradient);
  }

  /** Adds {@code delta} (one row per entry of {@code rows}) to those rows; a row listed twice gets both. */
  public void scatterAdd(long[] rows, float[] delta) {
    if (delta.length != (long) rows.length * rowLength) {
      throw new IllegalArgumentException("scatter-add on " + name + " of " + rows.length + " rows of " + rowLength
          + " needs " + rows.length * rowLength + " values, got " + delta.length);
    }
    for (Shard shard : shards) {
      int[] mine = positionsIn(shard, rows);
      if (mine.length == 0) {
        continue;
      }
      long[] local = new long[mine.length];
      float[] part = new float[mine.length * rowLength];
      for (int j = 0; j < mine.length; j++) {
        local[j] = rows[mine[j]] - shard.firstRow();
        System.arraycopy(delta, mine[j] * rowLength, part, j * rowLength, rowLength);
      }
      send(shard, UpdateRequest.Op.SCATTER_ADD, local, part);
    }
  }

  private void dense(UpdateRequest.Op op, float[] values) {
    if (values.length != size()) {
      throw new IllegalArgumentException(op + " on " + name + " of shape " + Arrays.toString(shape) + " needs "
          + size() + " values, got " + values.length);
    }
    for (Shard shard : shards) {
      int from = (int) (shard.firstRow() * rowLength);
      float[] part = shards.size() == 1 ? values : Arrays.copyOfRange(values, from, from + (int) (shard.rows() * rowLength));
      send(shard, op, new long[0], part);
    }
  }

  /** The positions in {@code rows} that fall in this shard; refuses rows outside the variable. */
  private int[] positionsIn(Shard shard, long[] rows) {
    long total = shape.length == 0 ? 0 : shape[0];
    for (long row : rows) {
      if (row < 0 || row >= total) {
        throw new IllegalArgumentException("row " + row + " is out of range for " + name + " of " + total + " rows");
      }
    }
    return java.util.stream.IntStream.range(0, rows.length)
        .filter(i -> rows[i] >= shard.firstRow() && rows[i] < shard.firstRow() + shard.rows()).toArray();
  }

  private void send(Shard shard, UpdateRequest.Op op, long[] rows, float[] values) {
    CompletableFuture<UpdateResponse> done = new CompletableFuture<>();
    StreamObserver<UpdateResponse> responses = new StreamObserver<>() {
      @Override
      public void onNext(UpdateResponse value) {
        done.complete(value);
      }

      @Override
      public void onError(Throwable t) {
        done.completeExceptionally(t);
      }

      @Override
      public void onCompleted() {}
    };
    String what = op.name().toLowerCase().replace('_', '-');
    if (fitsOneChunk(values.length)) {
      stub(shard).updateSmall(UpdateRequest.newBuilder().setName(shard.name()).setOp(op)
          .addAllRows(LongStream.of(rows).boxed().toList()).setData(Payloads.chunks(values).get(0)).build(), responses);
      await(shard, what, done);
      return;
    }
    StreamObserver<UpdateRequest> requests = stub(shard).update(responses);
    boolean first = true;
    for (ByteString chunk : Payloads.chunks(values)) {
      UpdateRequest.Builder request = UpdateRequest.newBuilder().setData(chunk);
      if (first) {
        request.setName(shard.name()).setOp(op).addAllRows(LongStream.of(rows).boxed().toList());
        first = false;
      }
      requests.onNext(request.build());
    }
    requests.onCompleted();
    await(shard, what, done);
  }

  private static boolean fitsOneChunk(long floats) {
    return floats * Float.BYTES <= Payloads.CHUNK_BYTES;
  }

  private float[] receive(Shard shard, int floats, String what, java.util.function.Consumer<StreamObserver<Chunk>> call) {
    CompletableFuture<float[]> done = new CompletableFuture<>();
    Payloads.Assembler assembler = new Payloads.Assembler(floats, what + " of " + shard.name());
    call.accept(new StreamObserver<>() {
      @Override
      public void onNext(Chunk chunk) {
        try {
          assembler.add(chunk.getData());
        } catch (IllegalArgumentException e) {
          done.completeExceptionally(e);
        }
      }

      @Override
      public void onError(Throwable t) {
        done.completeExceptionally(t);
      }

      @Override
      public void onCompleted() {
        try {
          done.complete(assembler.complete());
        } catch (IllegalArgumentException e) {
          done.completeExceptionally(e);
        }
      }
    });
    return await(shard, what, done);
  }

  private ParameterServerGrpc.ParameterServerStub stub(Shard shard) {
    return stubs.apply(shard.ps()).withDeadlineAfter(timeout.toNanos(), TimeUnit.NANOSECONDS);
  }

  private <T> T await(Shard shard, String what, CompletableFuture<T> done) {
    try {
      return done.get(timeout.toNanos() + TimeUnit.SECONDS.toNanos(1), TimeUnit.NANOSECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted during " + what + " of " + shard.name() + " on " + shard.ps(), e);
    } catch (TimeoutException e) {
      throw unavailable(shard, what, "no answer within " + Durations.words(timeout), e);
    } catch (ExecutionException e) {
      Throwable cause = e.getCause();
      if (cause instanceof StatusRuntimeException s) {
        Status.Code code = s.getStatus().getCode();
        if (code == Status.Code.UNAVAILABLE || code == Status.Code.DEADLINE_EXCEEDED || code == Status.Code.CANCELLED
            || code == Status.Code.UNKNOWN) {
          throw unavailable(shard, what, code + " " + s.getStatus().getDescription(), s);
        }
        if (code == Status.Code.FAILED_PRECONDITION) {
          throw new IllegalStateException(s.getStatus().getDescription(), s);
        }
        throw new IllegalArgumentException(code + ": " + s.getStatus().getDescription(), s);
      }
      if (cause instanceof RuntimeException r) {
        throw r;
      }
      throw new IllegalStateException(cause);
    }
  }

  private ParameterServerUnavailableException unavailable(Shard shard, String what, String why, Throwable cause) {
    return new ParameterServerUnavailableException(shard.ps(), "parameter server " + shard.ps() + " did not answer the "
        + what + " of " + shard.name() + ": " + why, cause);
  }

  @Override
  public String toString() {
    return name + Arrays.toString(shape) + " on " + shards.stream().map(s -> s.ps().toString()).distinct().toList();
  }
}
