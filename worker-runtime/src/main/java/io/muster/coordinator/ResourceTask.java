package io.muster.coordinator;

import java.util.List;

/** Creating one per-worker resource on one worker. */
record ResourceTask(long id, String function, List<Value> args, RemoteValue created) {}
