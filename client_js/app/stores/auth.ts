// Who is signed in on this device: the token (kept in localStorage, so every tab of this browser shares it),
// and the live connection built from it. A refused token (close code 4501/4503) signs the device out.
import { atom } from "nanostores";
import { connect, errorCode, type ConnectionState, type Rpc } from "../lib/rpc";

const TOKEN_KEY = "chatsync.token";

export const $token = atom<string | null>(readToken());
export const $rpc = atom<Rpc | null>(null);
export const $connection = atom<ConnectionState>("connecting");
/** Why the sign-in form is shown again (a refused token, an expired link), or null. */
export const $signInError = atom<string | null>(null);

function readToken(): string | null {
  try {
    return localStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

function open(token: string): Rpc {
  $rpc.get()?.close();
  const rpc = connect(token, {
    onState: (s) => $connection.set(s),
    onRefused: (code) => signOut(code === 4503 ? "This device was signed out (its access was revoked)."
                                               : "That access token was not accepted."),
  });
  $rpc.set(rpc);
  return rpc;
}

/** Starts the connection for a token kept from an earlier visit. */
export function resume(): void {
  const token = $token.get();
  if (token && !$rpc.get()) open(token);
}

/** Signs in with a pasted token: kept only once the server accepted it. */
export async function signIn(token: string): Promise<boolean> {
  token = token.trim();
  if (!token) {
    $signInError.set("Paste an access token first.");
    return false;
  }
  const rpc = open(token);
  try {
    await rpc.query("session.list", { limit: 1 });
  } catch (err) {
    rpc.close();
    $rpc.set(null);
    $signInError.set(errorCode(err) === "UNAUTHORIZED" ? "That access token was not accepted."
                                                       : "Could not reach the server; try again.");
    return false;
  }
  localStorage.setItem(TOKEN_KEY, token);
  $signInError.set(null);
  $token.set(token);
  return true;
}

export function signOut(reason: string | null = null): void {
  $rpc.get()?.close();
  $rpc.set(null);
  localStorage.removeItem(TOKEN_KEY);
  $token.set(null);
  $signInError.set(reason);
}

function deviceName(): string {
  const ua = navigator.userAgent;
  const browser = /Firefox\//.test(ua) ? "Firefox" : /Edg\//.test(ua) ? "Edge" : /Chrom/.test(ua) ? "Chrome"
    : /Safari\//.test(ua) ? "Safari" : "Browser";
  const os = /Android/.test(ua) ? "Android" : /iPhone|iPad/.test(ua) ? "iOS" : /Mac OS X/.test(ua) ? "macOS"
    : /Windows/.test(ua) ? "Windows" : /Linux/.test(ua) ? "Linux" : "";
  return os ? `${browser} on ${os}` : browser;
}

/**
 * Redeems a device sign-in link. The code travels in the URL's fragment, which browsers never send, and is
 * posted here in a body; the address bar is replaced first so the code is not kept in history either.
 */
export async function redeemLink(code: string): Promise<boolean> {
  history.replaceState(null, "", "/");
  try {
    const res = await fetch("/auth/link", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ code, deviceName: deviceName() }),
    });
    const body = await res.json().catch(() => null);
    if (!res.ok || !body?.token) {
      $signInError.set("This sign-in link is invalid, used or expired. Ask for a new one, or paste a token.");
      return false;
    }
    $rpc.get()?.close();
    $rpc.set(null);
    localStorage.setItem(TOKEN_KEY, body.token);
    $signInError.set(null);
    $token.set(body.token);
    resume();
    return true;
  } catch {
    $signInError.set("Could not reach the server to use this sign-in link.");
    return false;
  }
}
