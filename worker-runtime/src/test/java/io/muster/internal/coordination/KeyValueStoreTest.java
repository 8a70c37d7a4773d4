package io.muster.internal.coordination;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class KeyValueStoreTest {
  @Test
  void keysAreNormalisedAsTensorFlowDoes() {
    assertEquals("a/b/c", KeyValueStore.normalize("///a//b/c//"));
    assertEquals("a", KeyValueStore.normalize("a"));
    assertEquals("", KeyValueStore.normalize("///"));
  }
}
