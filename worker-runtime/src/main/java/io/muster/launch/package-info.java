/**
 * The launch core the Spark and YARN launchers share: the gang's spec, its start, how a job ends and which failures
 * re-run it, and a task's external command.
 */
package io.muster.launch;
