package io.muster.strategy;

/** What the strategies' builders check at {@code build()}, so a bad option fails there, naming itself. */
final class BuilderChecks {
  private BuilderChecks() {}

  /** @throws IllegalArgumentException naming {@code option} when {@code value} is null */
  static void requireSet(Object value, String option) {
    if (value == null) {
      throw new IllegalArgumentException(option + " must not be null; leave it unset for its default");
    }
  }
}
