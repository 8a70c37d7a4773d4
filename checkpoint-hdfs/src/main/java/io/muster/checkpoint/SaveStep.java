package io.muster.checkpoint;

/** The points of a save at which a crash must leave the previous checkpoint readable. */
enum SaveStep {
  DATA_WRITTEN,
  INDEX_WRITTEN,
  STATE_TEMP_WRITTEN,
  STATE_REPLACED
}
