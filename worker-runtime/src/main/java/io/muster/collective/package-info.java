/**
 * All-reduce, all-gather and broadcast over a job's chief and workers ({@link io.muster.collective.Collectives}),
 * and the options that choose how.
 */
package io.muster.collective;
