package io.muster.examples;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;

/**
 * A classification CSV for the parameter-server training example ({@code --data}): a header, numeric
 * feature columns, and a last column of integer class labels from 0 (as {@code digits.csv}). Rows
 * are shuffled by the seed, so every task that reads the file gets the same order; features are
 * standardized with the training rows' mean and deviation.
 */
final class CsvData {
  private CsvData() {}

  /**
   * @param trainFraction the share of rows (after shuffling) whose statistics standardize the features
   * @throws IllegalArgumentException naming the file, line and column of the first bad value
   */
  static SyntheticBlobs read(Path file, long seed, double trainFraction) {
    List<String> lines;
    try {
      lines = Files.readAllLines(file);
    } catch (IOException e) {
      throw new IllegalArgumentException("cannot read --data " + file + ": " + e.getMessage());
    }
    if (lines.size() < 3) {
      throw new IllegalArgumentException("--data " + file + " needs a header and at least two rows");
    }
    int columns = lines.get(0).split(",", -1).length;
    if (columns < 2) {
      throw new IllegalArgumentException("--data " + file + " needs feature columns and a label column");
    }
    List<float[]> x = new ArrayList<>();
    List<Integer> y = new ArrayList<>();
    int classes = 0;
    for (int n = 1; n < lines.size(); n++) {
      if (lines.get(n).isBlank()) {
        continue;
      }
      String[] cells = lines.get(n).split(",", -1);
      if (cells.length != columns) {
        throw new IllegalArgumentException("--data " + file + " line " + (n + 1) + " has " + cells.length
            + " columns, the header " + columns);
      }
      float[] row = new float[columns - 1];
      for (int c = 0; c < row.length; c++) {
        try {
          row[c] = Float.parseFloat(cells[c].trim());
        } catch (NumberFormatException e) {
          throw new IllegalArgumentException("--data " + file + " line " + (n + 1) + " column " + (c + 1)
              + " is not a number: '" + cells[c] + "'");
        }
      }
      int label;
      try {
        label = Integer.parseInt(cells[columns - 1].trim());
      } catch (NumberFormatException e) {
        label = -1;
      }
      if (label < 0) {
        throw new IllegalArgumentException("--data " + file + " line " + (n + 1) + ": the label (last column) must be "
            + "an integer >= 0, was '" + cells[columns - 1] + "'");
      }
      x.add(row);
      y.add(label);
      classes = Math.max(classes, label + 1);
    }
    List<Integer> order = new ArrayList<>();
    for (int i = 0; i < x.size(); i++) {
      order.add(i);
    }
    Collections.shuffle(order, new Random(seed));
    int features = columns - 1;
    float[][] xs = new float[x.size()][];
    int[] ys = new int[x.size()];
    for (int i = 0; i < order.size(); i++) {
      xs[i] = x.get(order.get(i));
      ys[i] = y.get(order.get(i));
    }
    standardize(xs, (int) (xs.length * trainFraction), features);
    return new SyntheticBlobs(xs, ys, features, classes);
  }

  private static void standardize(float[][] x, int trainRows, int features) {
    for (int f = 0; f < features; f++) {
      double sum = 0;
      double squares = 0;
      for (int i = 0; i < trainRows; i++) {
        sum += x[i][f];
        squares += (double) x[i][f] * x[i][f];
      }
      double mean = sum / trainRows;
      double sd = Math.sqrt(Math.max(squares / trainRows - mean * mean, 0));
      for (float[] row : x) {
        row[f] = (float) ((row[f] - mean) / (sd > 0 ? sd : 1));
      }
    }
  }
}
