package io.muster.checkpoint;

/**
 * The points of a save at which a crash must leave a complete checkpoint readable: the new state
 * file is written under a temporary name (while the checkpoint's files are written under
 * temporary names too), then renames make data, index and state visible, in this order.
 */
enum SaveStep {
  STATE_TEMP_WRITTEN,
  DATA_WRITTEN,
  INDEX_WRITTEN,
  STATE_REPLACED
}
