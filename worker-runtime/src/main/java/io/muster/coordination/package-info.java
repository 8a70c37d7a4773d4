/**
 * What a user sees of the coordination service: its options, its errors and the task states it reports. The service
 * and its agent are internal.
 */
package io.muster.coordination;
