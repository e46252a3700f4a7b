// The conversation keeping the reader's place and saying what went wrong: tool calls that end each their own way,
// the log following the newest message, failures with their reason and Retry, messages written while the server
// is away. Run by app_driver.mjs for tests/web; every control is found by its role and accessible name.
import { axeScan, connection, devices, openApp, until, words } from "./app_helpers.mjs";

const log = (page) => page.getByRole("log", { name: "Conversation" });
const messageBox = (page) => page.getByRole("textbox", { name: "Message" });
const card = (page, name) => log(page).getByRole("group", { name: `Tool call: ${name}` });
const cardStatus = async (group) => (await group.locator(".tool-status").textContent()).trim();

async function send(page, text) {
  await messageBox(page).fill(text);
  await messageBox(page).press("Enter");
}

async function waitIdle(page) {
  await page.waitForFunction(() => {
    const l = document.querySelector("[role=log]");
    return l && l.getAttribute("aria-busy") === "false" && !document.querySelector("[data-status=streaming]");
  });
  await page.getByRole("button", { name: "Stop" }).waitFor({ state: "detached" });
}

/** Starts a chat from the sidebar (on a phone the sidebar opens from the "Chats" button first). */
async function newChat(page) {
  const nav = page.getByRole("navigation", { name: "Sessions" });
  if (!(await nav.isVisible())) await page.getByRole("button", { name: "Chats" }).click();
  await nav.getByRole("button", { name: "New chat" }).click();
  await page.waitForURL(/\/s\//);
}

/** Where the newest message of the log is: whether its bottom edge is inside the log's visible box. */
const newestInView = (page) => page.evaluate(() => {
  const logEl = document.querySelector("[role=log]");
  const all = logEl.querySelectorAll(".msg");
  const last = all[all.length - 1];
  if (!last) return { visible: false, count: 0, url: location.pathname, text: logEl.innerText.slice(0, 300) };
  const box = logEl.getBoundingClientRect();
  const r = last.getBoundingClientRect();
  return { visible: r.bottom <= box.bottom + 1 && r.bottom > box.top, count: all.length,
           below: Math.round(r.bottom - box.bottom), text: (last.textContent || "").slice(0, 40) };
});

/** Waits until the newest message is in view, or fails saying where it is: after a send, an answer, a layout
 * change, the log settles at its end within a frame or two. */
const staysInView = (page, what) => until(() => newestInView(page), (v) => v.visible, { timeout: 5000, what });

/** The queue panel's item holding `tag`, or the sent message holding it. */
const queuedOrSent = (page, tag) => page.getByRole("list", { name: "Queued messages" }).getByRole("listitem")
  .filter({ hasText: tag }).or(log(page).locator("[data-role=user]").filter({ hasText: tag })).first();

const answersDone = (page, n) => page.waitForFunction((n) => {
  const done = document.querySelectorAll('[role=log] [data-role=assistant]:not([data-status=streaming])');
  return done.length >= n && !document.querySelector("[role=log] [data-status=streaming]");
}, n);

export const coreScenarios = {
  /** A new chat, an 80-word message, Enter on two more while it answers (the queue panel opens and shrinks the
   * log): on both devices the newest message stays in view after every send and every answer. Then the other
   * device's reader scrolls up: the log stays where they put it, "Jump to latest" counts what arrives, and
   * takes them to it. */
  async follow({ browser, url, token, viewport, checkpoint }) {
    return devices(browser, url, [{ token, viewport }, { token, viewport }], async ([d1, d2], problems) => {
      await openApp(d1.page, "/devices"); // not "/", which opens the newest chat by itself
      await newChat(d1.page);
      const checks = [];
      const inView = async (label) => {
        for (const [i, d] of [d1, d2].entries()) {
          if (i === 1 && !d2.open) continue;
          await staysInView(d.page, `${label} (device ${i + 1})`);
          checks.push(`${label} ${i + 1}`);
        }
      };
      await send(d1.page, words(80, "first"));
      await log(d1.page).locator("[data-role=user]").first().waitFor();
      const sessionId = decodeURIComponent(new URL(d1.page.url()).pathname.split("/")[2]);
      await openApp(d2.page, `/s/${sessionId}`);
      d2.open = true;
      await inView("first sent");
      await log(d1.page).locator("[data-role=assistant]").first().waitFor(); // answering (or done, on a slow host)
      for (const n of [2, 3]) {
        await send(d1.page, words(40, `queued${n}-`));
        // Queued while the first answer streams. On a slow host that answer (and the one the queue sent next)
        // may end before this send: then it is sent at once, and must stay in view all the same.
        for (const d of [d1, d2]) await queuedOrSent(d.page, `queued${n}-0`).waitFor();
        await inView(`queued ${n}`);
      }
      for (const n of [1, 2, 3]) {
        await answersDone(d1.page, n);
        await answersDone(d2.page, n);
        await inView(`answer ${n}`);
      }
      // A longer exchange, so there is room to scroll back.
      await send(d1.page, words(120, "long"));
      await inView("long sent");
      await answersDone(d1.page, 4);
      await answersDone(d2.page, 4);
      await inView("long answered");
      // The reader on device 2 scrolls up with the wheel: the log stays there while new messages arrive.
      const box = await log(d2.page).boundingBox();
      await d2.page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
      await d2.page.mouse.wheel(0, -600);
      const jump = d2.page.getByRole("button", { name: "Jump to latest", exact: true });
      await jump.waitFor();
      const topBefore = await log(d2.page).evaluate((el) => el.scrollTop);
      await send(d1.page, words(30, "later"));
      await staysInView(d1.page, "later sent, on the sender");
      await answersDone(d1.page, 5);
      await answersDone(d2.page, 5);
      const count = await until(() => d2.page.locator("#jump-count").textContent(), (t) => t === "2 new messages",
                                { what: "the count of new messages" });
      const away = await newestInView(d2.page);
      const topAfter = await log(d2.page).evaluate((el) => el.scrollTop);
      const axe = await axeScan(d2.page);
      await jump.click();
      await staysInView(d2.page, "after Jump to latest");
      await jump.waitFor({ state: "detached" });
      return { checks, count, awayVisible: away.visible, topBefore, topAfter, axe, problems: problems() };
    });
  },

  /** A chat whose answer failed while no device looked at it: the other device's sidebar marks it failed until
   * the chat is opened; the answer says why, also after a reload; Retry answers again. */
  async failure({ browser, url, token, sessionId, title }) {
    return devices(browser, url, [{ token }, { token, viewport: { width: 390, height: 844 } }], async ([d1, d2], problems) => {
      await openApp(d2.page, "/devices"); // not "/", which opens the newest chat
      const nav = d2.page.getByRole("navigation", { name: "Sessions" });
      if (!(await nav.isVisible())) await d2.page.getByRole("button", { name: "Chats" }).click();
      const row = nav.getByRole("listitem").filter({ has: d2.page.getByRole("link", { name: new RegExp(title) }) });
      const badges = async () => (await row.count()) ? row.locator(".badge").allTextContents()
                                                      : [`no row; rows: ${await nav.getByRole("listitem").allTextContents()}`];
      const badgeBefore = await until(badges, (b) => b.includes("failed"), { what: "the failed mark" });
      await openApp(d1.page, `/s/${sessionId}`);
      const ending = log(d1.page).locator("[data-role=assistant] .msg-ending p");
      await ending.first().waitFor();
      const shown = await ending.allTextContents();
      // looked at on device 1: device 2's mark goes
      const badgeAfter = await until(badges, (b) => !b.includes("failed"), { what: "the failed mark to go" });
      await d1.page.reload();
      await ending.first().waitFor();
      const afterReload = await ending.allTextContents();
      const axe = await axeScan(d1.page);
      await log(d1.page).getByRole("button", { name: "Retry", exact: true }).click();
      await answersDone(d1.page, 2);
      await log(d1.page).getByRole("button", { name: "Retry", exact: true }).waitFor({ state: "detached" });
      const answers = await log(d1.page).locator("[data-role=assistant]").evaluateAll((els) =>
        els.map((e) => ({ status: e.dataset.status, text: (e.querySelector(".md")?.textContent || "").trim() })));
      return { badgeBefore, badgeAfter, shown, afterReload, answers, axe, problems: problems() };
    });
  },

  /** A message written while the server is stopped shows at once as waiting, survives a reload made while the
   * server is still away (the service worker serves the app), and is sent once when the server is back. The test
   * stops the server at "ready" and starts it at "reloaded". */
  async offline({ browser, url, token, sessionId, text, checkpoint }) {
    return devices(browser, url, [{ token }], async ([d], problems) => {
      const { page } = d;
      await openApp(page, `/s/${sessionId}`);
      await page.waitForFunction(async () => !!(await navigator.serviceWorker.ready) && !!navigator.serviceWorker.controller);
      await checkpoint("ready", {});
      await connection(page).getByText(/^(connecting|reconnecting)$/).waitFor();
      await send(page, text);
      const pending = log(page).locator("[data-role=pending]");
      await pending.getByText("Waiting for connection", { exact: true }).waitFor();
      const box = await messageBox(page).inputValue();
      const shown = (await pending.locator(".plain").textContent()).trim();
      const sent = await pending.getAttribute("data-client-request-id");
      const banner = page.getByRole("alert").filter({ hasText: "Offline" });
      const bannerText = async () => (await banner.textContent()).replace(/\s+/g, " ").trim();
      await banner.getByText(/1 message waiting/).waitFor();
      const bannerBefore = await bannerText();
      await page.reload();
      await pending.getByText("Waiting for connection", { exact: true }).waitFor();
      const afterReload = { text: (await pending.locator(".plain").textContent()).trim(),
                            id: await pending.getAttribute("data-client-request-id") };
      await banner.getByText(/1 message waiting/).waitFor();
      const bannerAfterReload = await bannerText();
      await checkpoint("reloaded", {});
      await log(page).locator("[data-role=user]").filter({ hasText: text }).waitFor();
      await pending.waitFor({ state: "detached" });
      await banner.waitFor({ state: "detached" });
      await answersDone(page, 1);
      const users = await log(page).locator("[data-role=user] .plain").allTextContents();
      // While the server was away the browser itself reports the refused connections; nothing else may show.
      const away = /ERR_CONNECTION_REFUSED|WebSocket connection to .* failed|Failed to load resource/;
      return { box, shown, sent, afterReload, users, bannerBefore, bannerAfterReload,
               problems: problems().filter((p) => !away.test(p)) };
    });
  },

  /** The message box grows with what is written (up to a third of the window, then it scrolls); Esc in the
   * empty box stops the answer. */
  async composer_comfort({ browser, url, token, sessionId }) {
    return devices(browser, url, [{ token, viewport: { width: 1280, height: 800 } }], async ([d], problems) => {
      const { page } = d;
      await openApp(page, `/s/${sessionId}`);
      const height = () => messageBox(page).evaluate((el) => el.getBoundingClientRect().height);
      const empty = await height();
      await messageBox(page).fill(Array.from({ length: 6 }, (_, i) => `line ${i + 1}`).join("\n"));
      const six = await height();
      await messageBox(page).fill(Array.from({ length: 80 }, (_, i) => `line ${i + 1}`).join("\n"));
      const many = await height();
      const scrolls = await messageBox(page).evaluate((el) => el.scrollHeight > el.clientHeight);
      await messageBox(page).fill("");
      const emptyAgain = await height();
      await send(page, words(400, "stoppable"));
      await log(page).locator("[data-status=streaming]").waitFor();
      await messageBox(page).focus();
      await messageBox(page).press("Escape");
      await waitIdle(page);
      const ending = (await log(page).locator("[data-role=assistant]").last().locator(".msg-ending").textContent()).trim();
      const axe = await axeScan(page);
      return { empty, six, many, scrolls, emptyAgain, ending, window: 800, axe, problems: problems() };
    });
  },

  /** Every message has a bar (shown on hover): when it was written, "Copy" (as written: Markdown) and, on answers,
   * "Copy as plain text" (as read). */
  async message_actions({ browser, url, token, sessionId }) {
    // Reduced motion: the bars show and hide at once, so the scan at the end never catches one half faded
    // (a fading bar's buttons fail the contrast check while they fade).
    return devices(browser, url, [{ token, reducedMotion: "reduce" }], async ([d], problems) => {
      const { page } = d;
      await d.context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: url });
      await openApp(page, `/s/${sessionId}`);
      const answer = log(page).locator("[data-role=assistant]").last();
      await answer.locator(".md").waitFor();
      const bar = answer.getByRole("toolbar", { name: "Message actions" });
      const hidden = await bar.evaluate((el) => getComputedStyle(el).opacity);
      await answer.hover();
      await until(() => bar.evaluate((el) => getComputedStyle(el).opacity), (o) => o === "1", { what: "the bar on hover" });
      const time = bar.locator("time");
      const stamp = { text: await time.textContent(), iso: await time.getAttribute("datetime"),
                      title: await time.getAttribute("title") };
      const clipboard = () => page.evaluate(() => navigator.clipboard.readText());
      await page.evaluate(() => navigator.clipboard.writeText(""));
      await bar.getByRole("button", { name: "Copy", exact: true }).click();
      const markdown = await until(clipboard, (t) => t !== "", { what: "the answer as Markdown" });
      await page.evaluate(() => navigator.clipboard.writeText(""));
      await bar.getByRole("button", { name: "Copy as plain text", exact: true }).click();
      const plain = await until(clipboard, (t) => t !== "", { what: "the answer as plain text" });
      const user = log(page).locator("[data-role=user]").last();
      await user.hover();
      const userActions = await user.getByRole("toolbar", { name: "Message actions" }).getByRole("button").allTextContents();
      await page.evaluate(() => navigator.clipboard.writeText(""));
      await user.getByRole("button", { name: "Copy", exact: true }).click();
      const userCopy = await until(clipboard, (t) => t !== "", { what: "the user's message" });
      const axe = await axeScan(page);
      return { hidden, stamp, markdown, plain, userActions, userCopy, axe, problems: problems() };
    });
  },

  /** Calls that fail, are denied, name no tool or succeed: each card says so, on both devices and after a
   * reload. The session's calculator needs approval, so one device approves and the other denies. */
  async tool_outcomes({ browser, url, token, sessionId }) {
    return devices(browser, url, [{ token }, { token, colorScheme: "dark" }], async ([d1, d2], problems) => {
      const path = `/s/${sessionId}`;
      await openApp(d1.page, path);
      await openApp(d2.page, path);
      const nth = (page, i) => card(page, "calculator").nth(i);
      await send(d1.page, 'divide by zero\n/tool calculator {"expression": "1/0"}');
      await nth(d2.page, 0).getByRole("button", { name: "Approve" }).click();
      await nth(d1.page, 0).getByText("Failed", { exact: true }).waitFor();
      await waitIdle(d1.page);
      await send(d2.page, 'add\n/tool calculator {"expression": "2+2"}');
      await nth(d1.page, 1).getByRole("button", { name: "Deny" }).click();
      await nth(d2.page, 1).getByText("Denied", { exact: true }).waitFor();
      await waitIdle(d2.page);
      await send(d1.page, 'multiply\n/tool calculator {"expression": "6*7"}');
      await nth(d1.page, 2).getByRole("button", { name: "Approve" }).click();
      await nth(d2.page, 2).getByText("Done", { exact: true }).waitFor();
      await waitIdle(d1.page);
      await send(d1.page, "nothing of that name\n/tool no_such_tool {}");
      await card(d2.page, "no_such_tool").getByText("Unknown tool", { exact: true }).waitFor();
      await waitIdle(d1.page);
      const read = async (page) => ({
        calculator: await Promise.all([0, 1, 2].map((i) => cardStatus(nth(page, i)))),
        unknown: await cardStatus(card(page, "no_such_tool")),
        outcomes: await log(page).locator(".tool").evaluateAll((els) => els.map((e) => e.dataset.outcome)),
        edges: await log(page).locator(".tool").evaluateAll((els) => els.map((e) => getComputedStyle(e).borderLeftColor)),
      });
      const live = [await read(d1.page), await read(d2.page)];
      const axe = [await axeScan(d1.page), await axeScan(d2.page)];
      await d2.page.reload();
      await card(d2.page, "no_such_tool").waitFor();
      const reloaded = await read(d2.page);
      return { live, reloaded, axe, problems: problems() };
    });
  },
};
