package io.muster.cli;

/** A wrong command line or environment: printed as one line, exit code 2. */
final class UsageException extends RuntimeException {
  UsageException(String message) {
    super(message);
  }
}
