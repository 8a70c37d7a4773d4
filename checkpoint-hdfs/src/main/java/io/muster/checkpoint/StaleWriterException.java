package io.muster.checkpoint;

import java.io.IOException;

/**
 * A chief of an attempt that has ended (its host was cut off while the launcher ran the gang
 * again) tried to open or save in a directory a later attempt's chief has written since: nothing
 * was written, renamed or deleted.
 */
public final class StaleWriterException extends IOException {
  StaleWriterException(String message) {
    super(message);
  }
}
