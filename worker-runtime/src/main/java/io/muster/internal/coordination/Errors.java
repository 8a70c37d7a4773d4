package io.muster.internal.coordination;

import io.muster.coordination.CoordinationException;
import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.muster.cluster.TaskId;
import io.muster.proto.coordination.BarrierError;
import io.muster.proto.coordination.CoordinatedTask;
import io.muster.proto.coordination.CoordinationServiceError;
import io.muster.proto.coordination.GrpcPayloadContainer;

/**
 * Coordination errors on the wire, as TensorFlow sends them: a status whose trailer
 * {@code grpc-status-details-bin} holds a {@code GrpcPayloadContainer} with the
 * {@code CoordinationServiceError} payload (and {@code BarrierError} for barriers).
 */
final class Errors {

  static final String COORDINATION_PAYLOAD = "type.googleapis.com/tensorflow.CoordinationServiceError";
  static final String BARRIER_PAYLOAD = "type.googleapis.com/tensorflow.BarrierError";
  private static final Metadata.Key<byte[]> DETAILS =
      Metadata.Key.of("grpc-status-details-bin", Metadata.BINARY_BYTE_MARSHALLER);
  private static final int MAX_MESSAGE = 3072;

  private Errors() {}

  static CoordinatedTask toProto(TaskId task) {
    return CoordinatedTask.newBuilder().setJobName(task.job()).setTaskId(task.index()).build();
  }

  static TaskId fromProto(CoordinatedTask task) {
    return new TaskId(task.getJobName(), task.getTaskId());
  }

  /** A coordination error; {@code source} may be null. */
  static StatusRuntimeException error(Status.Code code, String message, TaskId source, boolean reported) {
    CoordinationServiceError.Builder payload = CoordinationServiceError.newBuilder().setIsReportedError(reported);
    if (source != null) {
      payload.setSourceTask(toProto(source));
    }
    return withPayloads(code, message, GrpcPayloadContainer.newBuilder()
        .putPayloads(COORDINATION_PAYLOAD, payload.build().toByteString()));
  }

  static StatusRuntimeException barrierError(Status.Code code, String message, String barrierId, long counter) {
    return withPayloads(code, message, GrpcPayloadContainer.newBuilder()
        .putPayloads(COORDINATION_PAYLOAD, ByteString.EMPTY)
        .putPayloads(BARRIER_PAYLOAD, BarrierError.newBuilder().setBarrierId(barrierId).setCounter(counter)
            .build().toByteString()));
  }

  private static StatusRuntimeException withPayloads(Status.Code code, String message, GrpcPayloadContainer.Builder payloads) {
    if (message.length() > MAX_MESSAGE) {
      message = message.substring(0, MAX_MESSAGE) + " ... [truncated]";
    }
    Metadata trailers = new Metadata();
    trailers.put(DETAILS, payloads.build().toByteArray());
    return Status.fromCode(code).withDescription(message).asRuntimeException(trailers);
  }

  /** The coordination payload of a status, or null when it has none (a transport error). */
  static CoordinationServiceError coordinationPayload(Throwable t) {
    Metadata trailers = Status.trailersFromThrowable(t);
    byte[] details = trailers == null ? null : trailers.get(DETAILS);
    if (details == null) {
      return null;
    }
    try {
      ByteString payload = GrpcPayloadContainer.parseFrom(details).getPayloadsMap().get(COORDINATION_PAYLOAD);
      return payload == null ? null : CoordinationServiceError.parseFrom(payload);
    } catch (InvalidProtocolBufferException e) {
      return null;
    }
  }

  /** The exception a caller sees for a failed call, with the source task when the payload names one. */
  static CoordinationException toException(String what, Throwable t) {
    return toException(what, t, "");
  }

  /** As {@link #toException(String, Throwable)}, with more words after the status's own. */
  static CoordinationException toException(String what, Throwable t, String more) {
    Status status = Status.fromThrowable(t);
    CoordinationServiceError payload = coordinationPayload(t);
    TaskId source = payload != null && payload.hasSourceTask() ? fromProto(payload.getSourceTask()) : null;
    String description = status.getDescription() == null ? status.getCode().toString() : status.getDescription();
    return new CoordinationException(status.getCode(), what + ": " + description + more, source, t);
  }
}
