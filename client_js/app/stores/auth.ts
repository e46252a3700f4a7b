// Who is signed in on this device: the token (kept in localStorage, so every tab of this browser shares it)
// and the client library's connection built from it. A refused or revoked token signs the device out.
import { atom } from "nanostores";
import {
  createChatsyncClient, errorCode, TOKEN_REVOKED, type ChatsyncClient, type ConnectionState,
} from "../lib/chatsync";

const TOKEN_KEY = "chatsync.token";
// Set when this browser's token was issued to it by a sign-in link: that token is this browser's alone, so
// signing out revokes it. A pasted token may be in use elsewhere (a terminal), so signing out only forgets it.
const LINKED_KEY = "chatsync.linked";

export const $token = atom<string | null>(readToken());
export const $client = atom<ChatsyncClient | null>(null);
export const $connection = atom<ConnectionState>("connecting");
/** Why the sign-in form is shown again (a refused token, an expired link), or null. */
export const $signInError = atom<string | null>(null);

let stopWatching: (() => void) | null = null;

function readToken(): string | null {
  try {
    return localStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

function close(): void {
  stopWatching?.();
  stopWatching = null;
  void $client.get()?.close();
  $client.set(null);
}

function open(token: string): ChatsyncClient {
  close();
  const client = createChatsyncClient({ url: location.origin, token });
  stopWatching = client.connection.subscribe((state) => {
    $connection.set(state);
    if (state === "signed-out") {
      signOut(client.closeCode.get() === TOKEN_REVOKED ? "This device was signed out (its access was revoked)."
                                                      : "That access token was not accepted.");
    }
  });
  $client.set(client);
  return client;
}

/** Starts the connection for a token kept from an earlier visit. */
export function resume(): void {
  const token = $token.get();
  if (token && !$client.get()) open(token);
}

/** Signs in with a pasted token: kept only once the server accepted it. */
export async function signIn(token: string): Promise<boolean> {
  token = token.trim();
  if (!token) {
    $signInError.set("Paste an access token first.");
    return false;
  }
  const client = open(token);
  try {
    await client.requests.query("session.list", { limit: 1 });
  } catch (err) {
    if ($client.get() === client) close();
    $signInError.set(errorCode(err) === "UNAUTHORIZED" || client.connection.get() === "signed-out"
      ? "That access token was not accepted." : "Could not reach the server; try again.");
    return false;
  }
  keep(token);
  return true;
}

export function signOut(reason: string | null = null): void {
  close();
  localStorage.removeItem(TOKEN_KEY);
  localStorage.removeItem(LINKED_KEY);
  $token.set(null);
  $signInError.set(reason);
}

function keep(token: string, linked = false): void {
  localStorage.setItem(TOKEN_KEY, token);
  if (linked) localStorage.setItem(LINKED_KEY, "1");
  else localStorage.removeItem(LINKED_KEY);
  $signInError.set(null);
  $token.set(token);
}

/** Keeps a token the server just issued (a spent sign-in link) and connects with it, replacing any other. */
export function adoptToken(token: string): void {
  keep(token, true);
  open(token);
}

/** "Sign out": this browser forgets its token; one a sign-in link issued to it is revoked on the server first
 * (so it is no use to anyone who copies it later), and that device leaves every Devices list. */
export async function signOutHere(): Promise<void> {
  const client = $client.get();
  if (client && localStorage.getItem(LINKED_KEY)) {
    try {
      const me = await client.requests.query("auth.me", undefined);
      if (me.deviceId) await client.requests.mutate("auth.revokeDevice", { deviceId: me.deviceId });
    } catch {
      // Offline or refused: the token is forgotten here anyway; it can be revoked from another device.
    }
  }
  signOut(null);
}
