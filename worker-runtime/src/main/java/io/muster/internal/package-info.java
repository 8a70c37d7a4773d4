/**
 * Not API: Muster's own helpers (JSON, CRC32C), public only so its other packages and modules can call them. They
 * may change in any release.
 */
package io.muster.internal;
