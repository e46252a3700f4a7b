/**
 * WebSocket close codes of the server (docs/sync.md "Close codes"), decided by range as the server groups
 * them: 4000-4499 reconnect and resume, 4500-4999 do not retry as is.
 */

/** The outbound buffer overflowed; reconnect and resume. */
export const SLOW_CONSUMER = 4000;
/** The server is shutting down; reconnect (to any replica) and resume. */
export const SHUTTING_DOWN = 4001;
/** The token in `connectionParams` was rejected. */
export const TOKEN_REJECTED = 4501;
/** `connectionParams` were malformed. */
export const BAD_CONNECTION_PARAMS = 4502;
/** The token was revoked (its device signed out). */
export const TOKEN_REVOKED = 4503;

/** True for codes after which reconnecting unchanged cannot help. */
export function isFinalCloseCode(code: number | undefined): boolean {
  return code !== undefined && code >= 4500 && code <= 4999;
}

/** True for codes that mean the token is no good: the user must sign in again. */
export function isSignedOutCode(code: number | undefined): boolean {
  return code === TOKEN_REJECTED || code === TOKEN_REVOKED;
}
