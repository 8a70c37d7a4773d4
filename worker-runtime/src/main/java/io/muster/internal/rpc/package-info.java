/**
 * Not API: the task server, channels, token checks and reachability probes the runtime and the launchers share.
 * They may change in any release.
 */
package io.muster.internal.rpc;
