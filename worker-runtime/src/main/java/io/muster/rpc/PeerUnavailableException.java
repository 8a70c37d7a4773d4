package io.muster.rpc;

/** A peer task could not be reached or stopped answering. The message names the task and address. */
public class PeerUnavailableException extends RuntimeException {
  public PeerUnavailableException(String message, Throwable cause) {
    super(message, cause);
  }
}
