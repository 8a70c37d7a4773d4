package io.muster.collective;

/**
 * How all-reduce combines the ranks' values. {@code MEAN} is TensorFlow's: SUM, then divide by
 * the group size. On integers the division truncates toward zero (Java's {@code /}, TensorFlow's
 * {@code truncatediv}): MEAN of 3 and 4 over 2 ranks is 3, of -3 and -4 is -3. Integer SUM and
 * PRODUCT wrap around on overflow (two's complement), as in TensorFlow.
 */
public enum ReduceOp {
  SUM,
  MEAN,
  MIN,
  MAX,
  PRODUCT
}
