/**
 * TFRecord files and {@code tf.train.Example} records, read and written as TensorFlow does.
 */
package io.muster.data;
