package io.muster.examples;

import java.util.Arrays;

/** {@code ./muster example <name> [args]}. */
public final class Examples {
  private Examples() {}

  public static void main(String[] args) throws Exception {
    String name = args.length == 0 ? "" : args[0];
    String[] rest = args.length == 0 ? args : Arrays.copyOfRange(args, 1, args.length);
    try {
      switch (name) {
        case "softmax" -> LocalTraining.main(rest);
        default -> {
          System.err.println("usage: muster example softmax [--workers 4] [--epochs 5] [--global-batch 240] "
              + "[--learning-rate 0.5] [--seed 7]");
          System.exit(2);
        }
      }
    } catch (IllegalArgumentException e) {
      System.err.println("muster example " + name + ": " + e.getMessage());
      System.exit(2);
    }
  }
}
