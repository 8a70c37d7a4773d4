package io.muster.coordinator;

import java.util.List;

/**
 * A function the coordinator schedules on workers by name. Every task registers the same
 * functions (the same jar runs everywhere, see {@link Functions}); a worker runs it with its own
 * {@link WorkerContext}. It may run more than once (at least once per scheduling: a worker that
 * fails mid-call has the call run again elsewhere), so side effects should be idempotent or
 * tolerate repeats. An exception it throws is the user's error: it fails the closure and is raised
 * by the coordinator's next {@code schedule}, {@code join} or {@code done}.
 */
@FunctionalInterface
public interface RemoteFunction {
  Value call(WorkerContext worker, List<Value> args) throws Exception;
}
