// Shared by the web app's browser scripts: Debian's Chromium through playwright-core (never a downloaded
// browser), devices as browser contexts (each its own localStorage, so its own sign-in), and the official
// @trpc/client over `ws` as a client that is not a browser.
import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRequire } from "node:module";
import { chromium } from "playwright-core";
import { createTRPCUntypedClient, createWSClient, wsLink } from "@trpc/client";
import WebSocket from "ws";

const require = createRequire(import.meta.url);

export const CHROMIUM = "/usr/bin/chromium";

export function launch() {
  return chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
}

/**
 * A device: a browser context with its own storage. `token` signs it in before the app starts (as if it
 * had signed in earlier); without one it starts signed out. Console errors, page errors and dialogs are
 * recorded on `device.problems` — the app must load and run without any.
 */
export async function device(browser, url, { token = null, viewport = { width: 1200, height: 800 }, colorScheme,
                                              reducedMotion } = {}) {
  const context = await browser.newContext({ viewport, colorScheme, reducedMotion, baseURL: url });
  if (token) {
    // Once per tab (a reload keeps what the app did since), and only on the app's origin (not about:blank).
    await context.addInitScript((t) => {
      if (location.protocol.startsWith("http") && !sessionStorage.getItem("test.signed-in")) {
        localStorage.setItem("chatsync.token", t);
        sessionStorage.setItem("test.signed-in", "1");
      }
    }, token);
  }
  const problems = [];
  context.on("console", (m) => { if (m.type() === "error") problems.push(`console: ${m.text()}`); });
  context.on("weberror", (e) => problems.push(`pageerror: ${e.error()}`));
  context.on("dialog", async (d) => { problems.push(`dialog: ${d.message()}`); await d.dismiss(); });
  const page = await context.newPage();
  return { context, page, problems };
}

/**
 * Runs `body(devices, problems)` with a device for each spec (see `device`), and closes them all after.
 * `problems()` collects what every device recorded.
 */
export async function devices(browser, url, specs, body) {
  const made = [];
  try {
    for (const spec of specs) made.push(await device(browser, url, spec));
    return await body(made, () => made.flatMap((d) => d.problems));
  } catch (error) {
    // What each device showed when the scenario failed: its address, a screenshot and the start of its text.
    const shown = [];
    for (const [i, d] of made.entries()) {
      const file = join(tmpdir(), `chatsync-failed-${process.pid}-${Date.now()}-device${i + 1}.png`);
      try {
        await d.page.screenshot({ path: file, timeout: 5000 });
        const text = (await d.page.locator("body").innerText({ timeout: 5000 })).replace(/\s+/g, " ").slice(0, 400);
        // What the app announced (a failed action says why there) and what the device recorded.
        const live = d.page.locator("[role=status], [role=alert], [aria-live]");
        const said = (await live.allInnerTexts()).join(" | ").replace(/\s+/g, " ");
        shown.push(`device ${i + 1} at ${d.page.url()}: screenshot ${file}; text: ${text}; announced: ${said}` +
                   (d.problems.length ? `; problems: ${d.problems.join(" | ")}` : ""));
      } catch { shown.push(`device ${i + 1}: could not capture`); }
    }
    if (error instanceof Error && shown.length) error.stack = `${error.stack}\n${shown.join("\n")}`;
    throw error;
  } finally {
    for (const d of made) await d.context.close();
  }
}

/** The app's connection status region ("connecting", "connected", ...). */
export const connection = (page) => page.getByRole("status", { name: "Connection" });

/** Opens a path and waits until the app is signed in and connected. */
export async function openApp(page, path = "/") {
  await page.goto(path);
  await page.getByRole("status", { name: "Connection" }).getByText(/^(connected|resumed)$/).waitFor();
}

/** The official @trpc/client over a WebSocket, as a terminal or script would use it. */
export function trpcClient(url, token) {
  const ws = createWSClient({ url: url.replace(/^http/, "ws") + "/trpc", connectionParams: { token }, WebSocket });
  const client = createTRPCUntypedClient({ links: [wsLink({ client: ws })] });
  return {
    query: (path, input) => client.query(path, input),
    mutate: (path, input) => client.mutation(path, input),
    close: () => ws.close(),
  };
}

/** axe-core's WCAG 2.x A/AA rules on the page as it is now; returns the violations (ids and targets). */
export async function axeScan(page) {
  const source = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
  // evaluate() runs as the debugger does, outside the page's CSP, which rightly refuses inline scripts.
  await page.evaluate(source + "\n;0");
  return page.evaluate(async () => {
    const res = await window.axe.run(document, {
      runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"] },
    });
    return res.violations.map((v) => ({ id: v.id, help: v.help, targets: v.nodes.map((n) => n.target.join(" ")) }));
  });
}

/** The texts of the queue panel's items as a person sees them. */
export async function queueTexts(page) {
  const list = page.getByRole("list", { name: "Queued messages" });
  if (await list.count() === 0) return [];
  return list.getByRole("listitem").locator(".queue-text").allTextContents();
}

/** Waits until `read()` returns a value that `ok` accepts; returns it. Polls on animation frames' pace. */
export async function until(read, ok, { timeout = 30_000, what = "condition" } = {}) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    last = await read();
    if (ok(last)) return last;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export const previewOf = (text) => {
  const chars = Array.from(text);
  return chars.length > 50 ? chars.slice(0, 50).join("") + "…" : text;
};

/** `n` words, so the echo model (one word per CHATSYNC_ECHO_DELAY) answers for a while. */
export const words = (n, tag = "w") => Array.from({ length: n }, (_, i) => `${tag}${i}`).join(" ");

/**
 * Delivers `payloads` (objects, as the server's push would carry them) to the device's service worker, one after
 * another, as a push service would (DevTools: ServiceWorker.deliverPushMessage). Notifications get permission.
 */
export async function deliverPush(d, url, payloads) {
  const origin = new URL(url).origin;
  await d.context.grantPermissions(["notifications"], { origin });
  const scope = await d.page.evaluate(async () => (await navigator.serviceWorker.ready).scope);
  const cdp = await d.context.newCDPSession(d.page);
  await cdp.send("ServiceWorker.enable");
  const versions = [];
  cdp.on("ServiceWorker.workerRegistrationUpdated", (e) => versions.push(...e.registrations));
  const regs = await until(async () => versions, (v) => v.some((r) => r.scopeURL === scope), {
    what: "the worker's registration",
  });
  const reg = regs.find((r) => r.scopeURL === scope);
  for (const payload of payloads) {
    const before = await notifications(d.page);
    const shown = (list) => list.some((n) => n.body === payload.body &&
      !before.some((b) => b.body === n.body && b.tag === n.tag));
    // Each shown before the next goes: a notification whose body says so is up. A worker that was still
    // starting may miss the message (as a push service would, it is sent again; its tag replaces a copy).
    for (let attempt = 1; ; attempt++) {
      await cdp.send("ServiceWorker.deliverPushMessage", {
        origin, registrationId: reg.registrationId, data: JSON.stringify(payload),
      });
      try {
        await until(() => notifications(d.page), shown, { what: `the notification "${payload.body}"`,
                                                          timeout: attempt < 3 ? 10_000 : 30_000 });
        break;
      } catch (err) {
        if (attempt >= 3) throw err;
      }
    }
  }
}

/** The notifications the device's service worker registration shows now. */
export function notifications(page) {
  return page.evaluate(async () => (await (await navigator.serviceWorker.ready).getNotifications())
    .map((n) => ({ title: n.title, body: n.body, tag: n.tag, actions: n.actions.map((a) => a.action),
                   sessionId: n.data?.sessionId ?? null })));
}
