/**
 * The two distribution strategies a training program builds: {@link io.muster.strategy.MultiWorkerMirroredStrategy}
 * and {@link io.muster.strategy.ParameterServerStrategy}.
 */
package io.muster.strategy;
