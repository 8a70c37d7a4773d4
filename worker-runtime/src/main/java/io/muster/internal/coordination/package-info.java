/**
 * Not API: the coordination service, its agent and the task runtime that joins a task to its job. Users reach them
 * through the strategies. They may change in any release.
 */
package io.muster.internal.coordination;
