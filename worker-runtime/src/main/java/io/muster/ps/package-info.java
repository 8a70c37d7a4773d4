/**
 * Variables that live on parameter servers, their optimizers, and how they are split across ps tasks.
 */
package io.muster.ps;
