// A device sign-in link opened in this browser (/link#<code>). Spending a code signs the browser in to the
// link's account, and anyone can send a browser to a link: a page may navigate a signed-in person to the
// attacker's link, and what they typed next would go to the attacker's account (login CSRF). So the app first
// asks the server whose account the link is for, without spending it (POST /auth/link/info), names it, and
// spends it (POST /auth/link) only when the person says so. Declining keeps the current sign-in and leaves
// the code unspent.
import { atom } from "nanostores";
import { $client, $signInError, $token, adoptToken } from "./auth";

/** Who this browser was signed in as when the link was opened: null for nobody; `name` null when unknown. */
export type Current = { name: string | null } | null;

export type LinkPrompt =
  | { step: "checking" }
  | { step: "ask"; account: string; deviceName: string | null; current: Current }
  | { step: "already"; account: string; expiresAt: number }
  | { step: "signing-in"; account: string }
  | { step: "failed"; message: string; current: Current };

export const $linkPrompt = atom<LinkPrompt | null>(null);

// The code itself stays here, in memory only: never in the address bar, history or storage.
let pending: { code: string; named: boolean } | null = null;

class LinkRefused extends Error {}

async function post(path: string, body: unknown): Promise<any> {
  let res: Response;
  try {
    res = await fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
  } catch {
    throw new LinkRefused("Could not reach the server to use this sign-in link.");
  }
  const data = await res.json().catch(() => null);
  if (!res.ok) throw new LinkRefused(data?.error?.message ?? "This sign-in link is invalid, used or expired.");
  return data;
}

async function currentAccount(): Promise<Current> {
  const client = $client.get();
  if (!$token.get() || !client) return null;
  try {
    return { name: (await client.requests.query("auth.me", undefined)).user.name };
  } catch {
    return $token.get() ? { name: null } : null; // null: the token was refused meanwhile (signed out)
  }
}

function failed(message: string, current: Current): void {
  pending = null;
  if (current) {
    $linkPrompt.set({ step: "failed", message, current });
  } else {
    $linkPrompt.set(null);
    $signInError.set(`${message} Ask for a new link, or paste a token.`);
  }
}

/** Looks the link up and asks; call once the code has left the address bar. */
export async function openLink(code: string): Promise<void> {
  $linkPrompt.set({ step: "checking" });
  const [info, current] = await Promise.all([
    post("/auth/link/info", { code }).catch((err: LinkRefused) => err),
    currentAccount(),
  ]);
  if (info instanceof LinkRefused) return failed(info.message, current);
  if (current?.name === info.userName) {
    $linkPrompt.set({ step: "already", account: info.userName, expiresAt: info.expiresAt });
    return;
  }
  pending = { code, named: info.deviceName != null };
  $linkPrompt.set({ step: "ask", account: info.userName, deviceName: info.deviceName, current });
}

/** Spends the code and signs this browser in to the link's account (replacing any other sign-in). */
export async function acceptLink(): Promise<void> {
  const prompt = $linkPrompt.get();
  if (prompt?.step !== "ask" || !pending) return;
  const { code, named } = pending;
  $linkPrompt.set({ step: "signing-in", account: prompt.account });
  try {
    // A name chosen when the link was made wins over the browser's.
    const res = await post("/auth/link", { code, deviceName: named ? null : browserName() });
    pending = null;
    adoptToken(res.token);
    $linkPrompt.set(null);
  } catch (err) {
    failed((err as Error).message, prompt.current);
  }
}

/** Leaves the link unused; whoever was signed in stays signed in. */
export function dismissLink(): void {
  pending = null;
  $linkPrompt.set(null);
}

function browserName(): string {
  const ua = navigator.userAgent;
  const browser = /Firefox\//.test(ua) ? "Firefox" : /Edg\//.test(ua) ? "Edge" : /Chrom/.test(ua) ? "Chrome"
    : /Safari\//.test(ua) ? "Safari" : "Browser";
  const os = /Android/.test(ua) ? "Android" : /iPhone|iPad/.test(ua) ? "iOS" : /Mac OS X/.test(ua) ? "macOS"
    : /Windows/.test(ua) ? "Windows" : /Linux/.test(ua) ? "Linux" : "";
  return os ? `${browser} on ${os}` : browser;
}
