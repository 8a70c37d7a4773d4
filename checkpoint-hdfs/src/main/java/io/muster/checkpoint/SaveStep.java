package io.muster.checkpoint;

/**
 * The points of a save at which a crash must leave a complete checkpoint readable, in the order
 * they happen: the new state file is written under a temporary name, then the checkpoint's files
 * (also under temporary names), then renames make data, index and state visible.
 */
enum SaveStep {
  STATE_TEMP_WRITTEN,
  DATA_WRITTEN,
  INDEX_WRITTEN,
  STATE_REPLACED
}
