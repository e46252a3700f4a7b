/**
 * What the client does after the server closed its WebSocket, decided by the code's range as the server groups
 * them (docs/sync.md "Close codes"). The codes themselves are generated from the server's
 * (server/domain/close_codes.py) into router.gen.ts, under the same names.
 */
import { FINAL_MAX, FINAL_MIN, TOKEN_REVOKED, UNAUTHORIZED } from "./router.gen.js";

/** True for codes after which reconnecting unchanged cannot help. */
export function isFinalCloseCode(code: number | undefined): boolean {
  return code !== undefined && code >= FINAL_MIN && code <= FINAL_MAX;
}

/** True for codes that mean the token is no good: the user must sign in again. */
export function isSignedOutCode(code: number | undefined): boolean {
  return code === UNAUTHORIZED || code === TOKEN_REVOKED;
}

/** The close code an `UNAUTHORIZED` answer stands for: `TOKEN_REVOKED` when the server says the token was a
 * device's and was revoked (`data.reason`), so a device signed out while offline is told so; else undefined. */
export function signedOutCodeOf(err: unknown): number | undefined {
  const data = (err as { data?: { reason?: unknown } } | null)?.data;
  return data?.reason === "TOKEN_REVOKED" ? TOKEN_REVOKED : undefined;
}
