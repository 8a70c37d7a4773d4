package io.muster.coordinator;

import java.util.List;

/** A scheduled function with its arguments ({@link Value} or {@link PerWorkerValues}) and its output. */
record Closure(long id, String function, List<Object> args, RemoteValue output) {}
