/**
 * A job's security as a user configures it: the job token, TLS files, and the errors a call to a peer can end in.
 */
package io.muster.rpc;
