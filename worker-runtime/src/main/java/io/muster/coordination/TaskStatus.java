package io.muster.coordination;

import io.muster.cluster.TaskId;
import java.util.Optional;

/** One task as the coordination service sees it; {@code error} is set in state {@link TaskState#ERROR}. */
public record TaskStatus(TaskId task, TaskState state, Optional<String> error, long incarnation) {}
