// The web app's end-to-end scenarios, run by app_driver.mjs for tests/web. Each returns what the browsers
// showed; the Python tests compare that with the server (their own client) and assert. Every control is
// found by its role and accessible name, as a screen reader user would find it.
import { axeScan, connection, devices, openApp, queueTexts, until, words } from "./app_helpers.mjs";

const log = (page) => page.getByRole("log", { name: "Conversation" });
const messageBox = (page) => page.getByRole("textbox", { name: "Message" });
// What a reader sees of each answer (whitespace collapsed: markdown's own line breaks are not text).
const assistantTexts = async (page) => (await log(page).locator("[data-role=assistant] .md").allTextContents())
  .map((t) => t.replace(/\s+/g, " ").trim());
const busy = (page) => log(page).getAttribute("aria-busy");

/** Records every text the "Answer status" region takes, to check it speaks per run, not per token. */
async function recordAnnouncements(page) {
  await page.evaluate(() => {
    window.__announced = [];
    const region = document.querySelector('[role=status][aria-label="Answer status"]');
    new MutationObserver(() => { if (region.textContent) window.__announced.push(region.textContent); })
      .observe(region, { childList: true, characterData: true, subtree: true });
  });
}

async function waitStreaming(page) {
  await log(page).locator('[data-role=assistant][data-status=streaming] .md-block').first().waitFor();
}

async function waitIdle(page) {
  await page.waitForFunction(() => {
    const l = document.querySelector('[role=log]');
    return l && l.getAttribute("aria-busy") === "false" && !document.querySelector('[data-status=streaming]');
  });
  await page.getByRole("button", { name: "Stop" }).waitFor({ state: "detached" });
}

async function sameQueue(pages, ok, what) {
  return until(async () => Promise.all(pages.map(queueTexts)),
    (lists) => lists.every((l) => JSON.stringify(l) === JSON.stringify(lists[0])) && ok(lists[0]), { what });
}

const queueItem = (page, index) =>
  page.getByRole("list", { name: "Queued messages" }).getByRole("listitem").nth(index);

// Attachments: chips in the composer, files on messages.
const chips = (page) => page.getByRole("list", { name: "Files to send" });
const chip = (page, name) => chips(page).getByRole("listitem").filter({ hasText: name });
const chipNames = async (page) => (await chips(page).count() ? chips(page).locator(".chip-name").allTextContents() : []);
const readyChip = (page, name) => chip(page, name).and(page.locator("[data-state=ready]")).waitFor();

/** Picks files through the "Attach files" button, as the browser's file chooser would hand them over. */
async function pickFiles(page, files) {
  const [chooser] = await Promise.all([page.waitForEvent("filechooser"),
                                       page.getByRole("button", { name: "Attach files" }).click()]);
  await chooser.setFiles(files);
}

/** A real PNG drawn on a canvas in the page, pasted into the message box as a screenshot would be. */
async function pasteImage(page, name) {
  await messageBox(page).evaluate(async (box, name) => {
    const canvas = Object.assign(document.createElement("canvas"), { width: 96, height: 64 });
    const g = canvas.getContext("2d");
    g.fillStyle = "#1d4ed8"; g.fillRect(0, 0, 96, 64);
    g.fillStyle = "#f59e0b"; g.fillRect(16, 12, 40, 40);
    const blob = await new Promise((ok) => canvas.toBlob(ok, "image/png"));
    const data = new DataTransfer();
    data.items.add(new File([blob], name, { type: "image/png" }));
    box.focus();
    box.dispatchEvent(new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true }));
  }, name);
}

/** Drags a file from outside the page onto the composer and drops it. */
async function dropFile(page, name, text) {
  const data = await page.evaluateHandle(([name, text]) => {
    const d = new DataTransfer();
    d.items.add(new File([text], name, { type: "text/csv" }));
    return d;
  }, [name, text]);
  const target = messageBox(page);
  for (const type of ["dragenter", "dragover", "drop"]) await target.dispatchEvent(type, { dataTransfer: data });
}

/** What a device shows of the files on user messages: thumbnails (loaded from blob: URLs) and file chips. */
async function shownFiles(page) {
  return log(page).locator("[data-role=user]").evaluateAll((users) => users.map((u) => ({
    images: [...u.querySelectorAll(".attachments img")].map((img) => ({
      alt: img.alt, blob: img.src.startsWith("blob:"), loaded: img.complete && img.naturalWidth > 0,
      width: img.naturalWidth, height: img.naturalHeight, fileId: img.dataset.fileId,
    })),
    files: [...u.querySelectorAll(".attachments .file-chip")].map((b) => b.textContent),
  })).filter((u) => u.images.length || u.files.length));
}

export const scenarios = {
  /** Signed out → a wrong token → the right one; a first chat that streams; reload keeps the sign-in. */
  async sign_in({ browser, url, token }) {
    return devices(browser, url, [{}], async ([d], problems) => {
      const { page } = d;
      await page.goto("/");
      const tokenBox = page.getByRole("textbox", { name: "Access token" });
      const axeSignedOut = await axeScan(page);
      await tokenBox.fill("cs_not-a-real-token");
      await page.getByRole("button", { name: "Sign in" }).click();
      const refused = await page.getByRole("alert").textContent();
      await tokenBox.fill(token);
      await page.getByRole("button", { name: "Sign in" }).click();
      await connection(page).getByText("connected").waitFor();
      const nav = page.getByRole("navigation", { name: "Sessions" });
      await nav.getByRole("button", { name: "New chat" }).click();
      await page.waitForURL(/\/s\//);
      await recordAnnouncements(page);
      const text = words(40, "hello");
      await messageBox(page).fill(text);
      await messageBox(page).press("Enter");
      await page.waitForFunction(() => document.querySelector("[role=log]").getAttribute("aria-busy") === "true");
      await waitIdle(page);
      const announced = await page.evaluate(() => window.__announced);
      const sessionId = decodeURIComponent(new URL(page.url()).pathname.split("/")[2]);
      // The sidebar follows the title the server gave the chat (its first message, cut).
      await nav.getByRole("link", { name: /hello0 hello1/ }).waitFor();
      const sidebarTitle = await nav.getByRole("link", { name: /hello0 hello1/ }).locator(".session-title").textContent();
      const shown = await assistantTexts(page);
      await page.reload();
      await connection(page).getByText("connected").waitFor();
      await log(page).locator("[data-role=assistant]").first().waitFor();
      const afterReload = await assistantTexts(page);
      const storedToken = await page.evaluate(() => localStorage.getItem("chatsync.token"));
      return { refused, sessionId, announced, sidebarTitle, shown, afterReload, storedToken: storedToken === token,
               axeSignedOut, problems: problems() };
    });
  },

  /** Typing while the model answers on device 1; device 2 edits, reorders, removes; send-now; all in step. */
  async queue_sync({ browser, url, token, sessionId, checkpoint }) {
    return devices(browser, url, [{ token }, { token }], async ([d1, d2], problems) => {
      const path = `/s/${sessionId}`;
      await openApp(d1.page, path);
      await openApp(d2.page, path);
      const pages = [d1.page, d2.page];
      // A long answer (1,000 words at the test server's 50 ms a word): the queue is worked while it streams.
      await messageBox(d1.page).fill(words(1000, "long"));
      await messageBox(d1.page).press("Enter");
      await waitStreaming(d1.page);
      const typed = [1, 2, 3].map((i) => `queued message number ${i}: ` + words(12, `q${i}x`));
      for (const t of typed) {
        await messageBox(d1.page).fill(t);
        await messageBox(d1.page).press("Enter");
      }
      const steps = {};
      steps.enqueued = await sameQueue(pages, (l) => l.length === 3, "three queued items on both devices");
      const heading = await d2.page.getByRole("heading", { name: /messages? queued/ }).textContent();
      const busyWhileQueued = await busy(d1.page);
      await checkpoint("enqueued", { lists: steps.enqueued, heading });

      // Device 2 holds the queue, so nothing leaves it when the answer ends, whenever that is.
      await d2.page.getByRole("button", { name: "Pause queue" }).click();
      await d1.page.getByRole("heading", { name: "3 messages queued (paused)" }).waitFor();
      await checkpoint("paused", { lists: await Promise.all(pages.map(queueTexts)) });

      // Device 2 edits the second item in place.
      await queueItem(d2.page, 1).getByRole("button", { name: "Edit" }).click();
      const editor = d2.page.getByRole("textbox", { name: "Edit queued message" });
      await editor.fill("edited on device two: " + words(12, "e"));
      await d2.page.getByRole("button", { name: "Save" }).click();
      steps.edited = await sameQueue(pages, (l) => l[1]?.startsWith("edited on device two"), "the edit on both");
      await checkpoint("edited", { lists: steps.edited });

      // Device 2 moves the third item up.
      await queueItem(d2.page, 2).getByRole("button", { name: "Move up" }).click();
      steps.moved = await sameQueue(pages, (l) => l[1]?.startsWith("queued message number 3"), "the move on both");
      await checkpoint("moved", { lists: steps.moved });

      // Device 1 drags the first item (by its text; the buttons are for clicking) onto the last place.
      const first = steps.moved[0][0];
      await queueItem(d1.page, 0).locator(".queue-text").dragTo(queueItem(d1.page, 2).locator(".queue-text"));
      steps.dragged = await sameQueue(pages, (l) => l[2] === first, "the drag on both");
      await checkpoint("dragged", { lists: steps.dragged });

      // Device 2 removes the first item.
      const removed = steps.dragged[0][0];
      await queueItem(d2.page, 0).getByRole("button", { name: "Remove" }).click();
      steps.removed = await sameQueue(pages, (l) => l.length === 2 && !l.includes(removed), "the removal on both");
      await checkpoint("removed", { lists: steps.removed, removed });

      // Device 1 lets the queue flow again; nothing leaves it before the long answer ends.
      await d1.page.getByRole("button", { name: "Resume queue" }).click();
      await d2.page.getByRole("heading", { name: "2 messages queued" }).waitFor();
      await checkpoint("resumed", { lists: await Promise.all(pages.map(queueTexts)) });

      // Device 1 sends the first item now: the answer in progress stops, that item is sent, and the last
      // one follows when its answer ends.
      const [sentNow, last] = steps.removed[0];
      await queueItem(d1.page, 0).getByRole("button", { name: "Send now" }).click();
      await log(d2.page).locator("[data-role=user]").filter({ hasText: sentNow.replace(/…$/, "") }).waitFor();
      await log(d2.page).locator("[data-role=user]").filter({ hasText: last.replace(/…$/, "") }).waitFor();
      await sameQueue(pages, (l) => l.length === 0, "the queue drained on both");
      for (const p of pages) await waitIdle(p);
      await checkpoint("drained", { sentNow, last, answers: await Promise.all(pages.map(assistantTexts)) });

      // Typed during another answer, cleared from the other device.
      await messageBox(d1.page).fill(words(1000, "again"));
      await messageBox(d1.page).press("Enter");
      await waitStreaming(d1.page);
      for (const t of ["to be cleared one", "to be cleared two"]) {
        await messageBox(d1.page).fill(t);
        await messageBox(d1.page).press("Enter");
      }
      await sameQueue(pages, (l) => l.length === 2, "two items on both");
      await d2.page.getByRole("button", { name: "Clear queue" }).click();
      await d2.page.getByRole("button", { name: "Yes, clear it" }).click(); // it asks first
      await sameQueue(pages, (l) => l.length === 0, "the queue cleared on both");
      await checkpoint("cleared", { lists: await Promise.all(pages.map(queueTexts)) });
      await d2.page.getByRole("button", { name: "Stop" }).click();
      for (const p of pages) await waitIdle(p);
      return { busyWhileQueued, problems: problems() };
    });
  },

  /** A tab reloaded mid-answer and a socket cut mid-answer both end with the server's text, once. */
  async reload_and_drop({ browser, url, token, sessionId }) {
    return devices(browser, url, [{ token }, { token }], async ([d1, d2], problems) => {
      const routes = [];
      await d1.page.routeWebSocket(/\/trpc/, (ws) => { ws.connectToServer(); routes.push(ws); });
      const path = `/s/${sessionId}`;
      await openApp(d1.page, path);
      await openApp(d2.page, path);
      const states = [];
      await d1.page.exposeFunction("__connection", (s) => states.push(s));
      await d1.page.evaluate(() => {
        const el = document.querySelector('[role=status][aria-label="Connection"]');
        new MutationObserver(() => window.__connection(el.textContent)).observe(el, { subtree: true, childList: true, characterData: true });
      });
      await messageBox(d1.page).fill(words(240, "turn1"));
      await messageBox(d1.page).press("Enter");
      await waitStreaming(d2.page);
      await until(() => assistantTexts(d2.page), (t) => (t[0] ?? "").length > 40, { what: "some streamed text" });
      await d2.page.reload();
      await connection(d2.page).getByText("connected").waitFor();
      // The reloaded tab picks the answer up mid-stream (session.get's partial text, then the deltas).
      await log(d2.page).locator("[data-status=streaming]").waitFor();
      const streamingAfterReload = await log(d2.page).locator("[data-status=streaming]").count();
      // Cut device 1's socket from the server side mid-answer; it must reconnect and resume.
      await until(() => assistantTexts(d1.page), (t) => (t[0] ?? "").length > 200, { what: "more streamed text" });
      for (const r of routes.splice(0)) await r.close({ code: 4000, reason: "cut by the test" });
      await connection(d1.page).getByText("resumed").waitFor();
      await waitIdle(d1.page);
      await waitIdle(d2.page);
      // A second turn, sent while the page is back, to show the resumed socket carries new runs too.
      await messageBox(d1.page).fill(words(20, "turn2"));
      await messageBox(d1.page).press("Enter");
      await until(() => assistantTexts(d2.page), (t) => t.length === 2 && t[1].includes("turn219"), { what: "turn 2 on d2" });
      await waitIdle(d1.page);
      await waitIdle(d2.page);
      return { d1: await assistantTexts(d1.page), d2: await assistantTexts(d2.page), states, streamingAfterReload,
               problems: problems() };
    });
  },

  /** Two tabs of one device on two sessions: nothing of one shows in the other. */
  async isolation({ browser, url, token, s1, s2 }) {
    return devices(browser, url, [{ token }], async ([d], problems) => {
      const a = d.page;
      const b = await d.context.newPage();
      await openApp(a, `/s/${s1}`);
      await openApp(b, `/s/${s2}`);
      await messageBox(a).fill(words(150, "alpha"));
      await messageBox(a).press("Enter");
      await waitStreaming(a);
      await messageBox(a).fill("alpha queued while answering");
      await messageBox(a).press("Enter");
      await until(() => queueTexts(a), (l) => l.length === 1, { what: "a queued item in tab A" });
      await messageBox(b).fill("beta question");
      await messageBox(b).press("Enter");
      await until(() => assistantTexts(b), (t) => t.length === 1 && t[0].includes("beta question"), { what: "B's answer" });
      await waitIdle(b);
      await waitIdle(a);
      const logText = async (p) => (await log(p).textContent()) ?? "";
      return {
        aText: await logText(a), bText: await logText(b), bQueue: await queueTexts(b),
        aAssistants: (await assistantTexts(a)).length, bAssistants: (await assistantTexts(b)).length,
        problems: problems(),
      };
    });
  },

  /** A long chat opens at its newest messages; moving to "Load earlier messages" keeps the top of the log in view;
   * the button reads the older ones back to the start. */
  async long_history({ browser, url, token, sessionId }) {
    return devices(browser, url, [{ token }], async ([d], problems) => {
      const { page } = d;
      await openApp(page, `/s/${sessionId}`);
      const notes = () => log(page).locator("[data-role=system]").allTextContents();
      const earlier = page.getByRole("button", { name: "Load earlier messages" });
      const first = await until(notes, (t) => t.length === 200, { what: "the newest 200 messages" });
      // Moving to the button (as a keyboard or a screen reader does) brings the top of the log into view, where
      // it stays while the messages there are laid out; the log does not jump back to its end.
      await earlier.focus();
      // Ten frames after the focus, the button is still inside the log's box on every one.
      const focusKept = await page.evaluate(async () => {
        for (let i = 0; i < 10; i++) {
          await new Promise((r) => requestAnimationFrame(() => r()));
          const b = document.querySelector("[role=log] button.earlier").getBoundingClientRect();
          const box = document.querySelector("[role=log]").getBoundingClientRect();
          if (b.top < box.top || b.bottom > box.bottom) return false;
        }
        return true;
      });
      let clicks = 0;
      while (await earlier.count()) {
        await earlier.click();
        clicks++;
        await until(notes, (t) => t.length > first.length + (clicks - 1) * 200, { what: "an earlier page" });
        await earlier.or(log(page).getByText("note 0", { exact: true })).first().waitFor();
      }
      return { first, all: await notes(), clicks, focusKept, problems: problems() };
    });
  },

  /** A tool call needing approval shows on both devices; one approves, the other shows the decision. */
  async approval({ browser, url, token, sessionId }) {
    return devices(browser, url, [{ token }, { token }], async ([d1, d2], problems) => {
      const path = `/s/${sessionId}`;
      await openApp(d1.page, path);
      await openApp(d2.page, path);
      await messageBox(d1.page).fill('please multiply\n/tool calculator {"expression": "6*7"}');
      await messageBox(d1.page).press("Enter");
      const card = (p) => log(p).getByRole("group", { name: "Tool call: calculator" }).first();
      await card(d2.page).getByRole("button", { name: "Approve" }).waitFor();
      await card(d1.page).getByRole("button", { name: "Approve" }).waitFor();
      const argsShown = await card(d2.page).locator(".tool-args").textContent();
      await card(d2.page).getByRole("button", { name: "Approve" }).click();
      await card(d2.page).getByText("Approved on this device").waitFor();
      await card(d1.page).getByText(/^Approved on /).waitFor();
      const decisionOnD1 = await card(d1.page).getByText(/^Approved on /).textContent();
      await card(d1.page).locator(".tool-result").waitFor();
      await card(d2.page).locator(".tool-result").waitFor();
      await waitIdle(d1.page);
      // A second call, denied on device 1 this time.
      await messageBox(d2.page).fill('and divide\n/tool calculator {"expression": "1/0"}');
      await messageBox(d2.page).press("Enter");
      const second = (p) => log(p).getByRole("group", { name: "Tool call: calculator" }).nth(1);
      await second(d1.page).getByRole("button", { name: "Deny" }).click();
      await second(d1.page).getByText("Denied on this device").waitFor();
      await second(d2.page).getByText(/^Denied on /).waitFor();
      const denialOnD2 = await second(d2.page).getByText(/^Denied on /).textContent();
      await waitIdle(d2.page);
      return {
        argsShown, decisionOnD1, denialOnD2,
        approveLeftOnD1: await card(d1.page).getByRole("button", { name: "Approve" }).count(),
        results: [await card(d1.page).locator(".tool-result").textContent(),
                  await card(d2.page).locator(".tool-result").textContent()],
        problems: problems(),
      };
    });
  },

  /** Stop on device 2 ends the run for both; no text arrives after it. */
  async stop({ browser, url, token, sessionId, checkpoint }) {
    return devices(browser, url, [{ token }, { token }], async ([d1, d2], problems) => {
      const path = `/s/${sessionId}`;
      await openApp(d1.page, path);
      await openApp(d2.page, path);
      await messageBox(d1.page).fill(words(300, "stopme"));
      await messageBox(d1.page).press("Enter");
      await waitStreaming(d2.page);
      await until(() => assistantTexts(d2.page), (t) => (t[0] ?? "").length > 50, { what: "streamed text" });
      await d2.page.getByRole("button", { name: "Stop" }).click();
      for (const p of [d1.page, d2.page]) {
        await log(p).locator("[data-role=assistant][data-status=interrupted]").waitFor();
        await waitIdle(p);
      }
      const atStop = [await assistantTexts(d1.page), await assistantTexts(d2.page)];
      await checkpoint("stopped", { atStop });
      // Another turn, so anything still in flight for the stopped answer would have arrived by its end.
      await messageBox(d2.page).fill("after the stop");
      await messageBox(d2.page).press("Enter");
      for (const p of [d1.page, d2.page]) {
        await until(() => assistantTexts(p), (t) => t.length === 2 && t[1].includes("after the stop"), { what: "turn 2" });
        await waitIdle(p);
      }
      const after = [await assistantTexts(d1.page), await assistantTexts(d2.page)];
      const endings = [await log(d1.page).locator(".msg-ending").allTextContents(),
                       await log(d2.page).locator(".msg-ending").allTextContents()];
      return { atStop, after, endings, problems: problems() };
    });
  },

  /** Enter while an input method is composing picks a candidate; it must not send. */
  async ime({ browser, url, token, sessionId, checkpoint }) {
    return devices(browser, url, [{ token }], async ([d], problems) => {
      const { page } = d;
      await openApp(page, `/s/${sessionId}`);
      await messageBox(page).fill("にほんご");
      await messageBox(page).evaluate((el) => {
        el.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", code: "Enter", isComposing: true,
                                                        bubbles: true, cancelable: true }));
        // Safari reports the composing Enter only as keyCode 229.
        const legacy = new KeyboardEvent("keydown", { key: "Enter", code: "Enter", bubbles: true, cancelable: true });
        Object.defineProperty(legacy, "keyCode", { value: 229 });
        el.dispatchEvent(legacy);
      });
      const boxAfterComposingEnter = await messageBox(page).inputValue();
      await checkpoint("composing", { boxAfterComposingEnter });
      await messageBox(page).press("Shift+Enter");
      await messageBox(page).pressSequentially("二行目");
      const boxAfterShiftEnter = await messageBox(page).inputValue();
      await messageBox(page).press("Enter");
      await log(page).locator("[data-role=user]").first().waitFor();
      return { boxAfterComposingEnter, boxAfterShiftEnter, boxAfterEnter: await messageBox(page).inputValue(),
               problems: problems() };
    });
  },

  /** HTML and a javascript: link in a message: shown as text, the link neutralised, nothing runs. */
  async hostile({ browser, url, token, sessionId, content }) {
    return devices(browser, url, [{ token }], async ([d], problems) => {
      const { page } = d;
      await openApp(page, `/s/${sessionId}`);
      await messageBox(page).fill(content);
      await messageBox(page).press("Enter");
      await log(page).locator("[data-role=assistant] .md-block").first().waitFor();
      await waitIdle(page);
      return page.evaluate(() => {
        const l = document.querySelector("[role=log]");
        return {
          injected: l.querySelectorAll("img, script, iframe, [onerror], [onclick], style").length,
          hrefs: [...l.querySelectorAll("a")].map((a) => a.getAttribute("href")),
          userText: l.querySelector("[data-role=user] .plain").textContent,
          assistantText: l.querySelector("[data-role=assistant] .md").textContent,
          ran: window.__hostile ?? null,
        };
      }).then((r) => ({ ...r, problems: problems() }));
    });
  },

  /** axe-core finds nothing on the chat (messages, a tool card, queue) in light and dark, nor on Devices. */
  async accessibility({ browser, url, token, sessionId }) {
    const out = {};
    for (const colorScheme of ["light", "dark"]) {
      out[colorScheme] = await devices(browser, url, [{ token, colorScheme }], async ([d], problems) => {
        await openApp(d.page, `/s/${sessionId}`);
        await d.page.getByRole("list", { name: "Queued messages" }).waitFor();
        await log(d.page).locator("[data-role=assistant]").first().waitFor();
        await d.page.getByRole("group", { name: /Tool call/ }).first().waitFor();
        const chat = await axeScan(d.page);
        await d.page.getByRole("link", { name: "Devices" }).click();
        await d.page.getByRole("heading", { name: "Devices" }).waitFor();
        await d.page.getByRole("list", { name: "Signed-in devices" }).or(d.page.getByText("Loading…")).first().waitFor();
        const devicesPage = await axeScan(d.page);
        const background = await d.page.evaluate(() => getComputedStyle(document.body).backgroundColor);
        return { chat, devicesPage, background, problems: problems() };
      });
    }
    return out;
  },

  /** A 360 px wide phone: no sideways scrolling; the chats open from the top bar; reduced motion honoured. */
  async phone({ browser, url, token, sessionId }) {
    return devices(browser, url, [{ token, viewport: { width: 360, height: 740 }, reducedMotion: "reduce" }],
      async ([d], problems) => {
        const { page } = d;
        await openApp(page, `/s/${sessionId}`);
        await log(page).locator("[data-role=assistant]").first().waitFor();
        const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
        const navHidden = !(await page.getByRole("navigation", { name: "Sessions" }).isVisible());
        await page.getByRole("button", { name: "Chats" }).click();
        const nav = page.getByRole("navigation", { name: "Sessions" });
        await nav.getByRole("button", { name: "New chat" }).waitFor();
        const navOverflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
        // Its own chat (others of this user may be listed above it); opening one closes the menu.
        await nav.locator(`[data-session-id="${sessionId}"]`).getByRole("link").click();
        await nav.waitFor({ state: "hidden" });
        const composerVisible = await messageBox(page).isVisible();
        // A file with a long name: its chip is cut with an ellipsis, never wider than the screen.
        const long = "quarterly-report-with-a-very-long-name-that-goes-on-and-on-2026-final.txt";
        await pickFiles(page, [{ name: long, mimeType: "text/plain", buffer: Buffer.from("numbers") }]);
        await readyChip(page, long);
        const chipOverflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
        await page.getByRole("button", { name: `Remove ${long}` }).click();
        await messageBox(page).fill(words(200, "motion"));
        await messageBox(page).press("Enter");
        await waitStreaming(page);
        const animation = await page.evaluate(() => {
          const tail = document.querySelector(".streaming .md-tail");
          return tail ? getComputedStyle(tail, "::after").animationName : "no tail";
        });
        await page.getByRole("button", { name: "Stop" }).click();
        await waitIdle(page);
        return { overflow, navHidden, navOverflow, composerVisible, chipOverflow, animation, problems: problems() };
      });
  },

  /** The sidebar follows sessions changed elsewhere (created, queued, renamed, answering) and renames and
   * deletes from here. */
  async sidebar({ browser, url, token, checkpoint }) {
    return devices(browser, url, [{ token }], async ([d], problems) => {
      const { page } = d;
      await openApp(page, "/");
      const nav = page.getByRole("navigation", { name: "Sessions" });
      const item = (name) => nav.getByRole("listitem").filter({ has: page.getByRole("link", { name }) });
      await checkpoint("open", {});
      await item(/made elsewhere/).getByText("2 queued").waitFor();
      await checkpoint("created", {});
      await item(/renamed elsewhere/).waitFor();
      await item(/renamed elsewhere/).getByText("answering").waitFor();
      await item(/renamed elsewhere/).getByText("answering").waitFor({ state: "detached" });
      await item(/renamed elsewhere/).getByRole("button", { name: "Rename" }).click();
      await nav.getByRole("textbox", { name: "Chat title" }).fill("renamed here");
      await nav.getByRole("button", { name: "Save" }).click();
      await item(/renamed here/).waitFor();
      await checkpoint("renamed", {});
      await item(/renamed here/).getByRole("button", { name: "Delete" }).click();
      await nav.getByRole("button", { name: "Confirm delete" }).click();
      await item(/renamed here/).waitFor({ state: "detached" });
      await checkpoint("deleted", {});
      return { problems: problems() };
    });
  },

  /** A session that steers: what is typed during an answer joins that answer instead of the queue. */
  async steer({ browser, url, token, sessionId }) {
    return devices(browser, url, [{ token }], async ([d], problems) => {
      const { page } = d;
      await openApp(page, `/s/${sessionId}`);
      await messageBox(page).fill(words(120, "first"));
      await messageBox(page).press("Enter");
      await waitStreaming(page);
      const hint = await page.locator("#composer-hint").textContent();
      await messageBox(page).fill("steered while answering");
      await messageBox(page).press("Enter");
      await log(page).locator("[data-role=user]").filter({ hasText: "steered while answering" }).waitFor();
      const queueShown = await page.getByRole("list", { name: "Queued messages" }).count();
      await waitIdle(page);
      return { hint, queueShown, problems: problems() };
    });
  },

  /** Files picked, pasted and dropped on device 1, one removed, one refused; sent while the model answers so
   * they wait in the queue with their message on both devices; then thumbnails and chips on both. */
  async attachments({ browser, url, token, sessionId, maxFileBytes, shots, checkpoint }) {
    // Device 2 in dark colours, so axe checks the files on messages and the notices in both schemes.
    return devices(browser, url, [{ token }, { token, colorScheme: "dark" }], async ([d1, d2], problems) => {
      const path = `/s/${sessionId}`;
      await openApp(d1.page, path);
      await openApp(d2.page, path);
      // A long answer (600 words at 50 ms a word: 30 s, with room to spare on a busy machine); the files are
      // attached and the message typed during it.
      await messageBox(d1.page).fill(words(600, "long"));
      await messageBox(d1.page).press("Enter");
      await waitStreaming(d1.page);
      const notes = "meeting notes\n".repeat(40);
      await pickFiles(d1.page, [{ name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from(notes) }]);
      await readyChip(d1.page, "notes.txt");
      await pasteImage(d1.page, "pasted.png");
      await readyChip(d1.page, "pasted.png");
      await dropFile(d1.page, "dropped.csv", "a,b\n1,2\n");
      await readyChip(d1.page, "dropped.csv");
      const picked = await chipNames(d1.page);
      await d1.page.getByRole("button", { name: "Remove dropped.csv" }).click();
      await chip(d1.page, "dropped.csv").waitFor({ state: "detached" });

      // Too large: the chip says what the server said, and nothing is sent while it is there.
      await pickFiles(d1.page, [{ name: "huge.bin", mimeType: "application/octet-stream",
                                  buffer: Buffer.alloc(maxFileBytes + 1) }]);
      await chip(d1.page, "huge.bin").and(d1.page.locator("[data-state=failed]")).waitFor();
      const refusal = await chip(d1.page, "huge.bin").locator(".error").textContent();
      await messageBox(d1.page).fill("not while a file is refused");
      await messageBox(d1.page).press("Enter");
      const blocked = d1.page.getByRole("status", { name: "Answer status" }).getByText(/could not be attached/);
      await blocked.waitFor();
      const blockedAnnouncement = await blocked.textContent();
      const boxWhileBlocked = await messageBox(d1.page).inputValue();
      await d1.page.getByRole("button", { name: "Remove huge.bin" }).click();
      await chip(d1.page, "huge.bin").waitFor({ state: "detached" });
      const kept = await chipNames(d1.page);
      await messageBox(d1.page).fill("");
      if (shots) await d1.page.locator(".composer").screenshot({ path: `${shots}/composer.png` });

      await messageBox(d1.page).fill("what do these say");
      await messageBox(d1.page).press("Enter");
      const countOf = (page) => queueItem(page, 0).locator(".queue-attachments").textContent();
      await until(() => Promise.all([d1.page, d2.page].map((p) => queueItem(p, 0).locator(".queue-attachments").count())),
        (n) => n.every((c) => c === 1), { what: "the queued item with its files on both devices" });
      const queued = { counts: [await countOf(d1.page), await countOf(d2.page)], texts: await queueTexts(d2.page),
                       chipsAfterSend: await chipNames(d1.page), busy: await busy(d1.page) };
      await checkpoint("queued", queued);

      // The answer ends, the queued message goes out with its files: both devices show them. The long answer
      // has up to 30 s left to stream (more on a busy machine): the queue empties when it ends.
      await until(() => d1.page.getByRole("list", { name: "Queued messages" }).getByRole("listitem").count(),
        (n) => n === 0, { timeout: 180_000, what: "the queued message to go out after the long answer" });
      for (const p of [d1.page, d2.page]) {
        await until(() => shownFiles(p), (u) => u.length === 1 && u[0].images.length === 1 && u[0].images[0].loaded,
          { what: "the thumbnail", timeout: 90_000 });
      }
      for (const p of [d1.page, d2.page]) await waitIdle(p);
      const shown = [await shownFiles(d1.page), await shownFiles(d2.page)];
      await checkpoint("sent", { shown });
      if (shots) {
        await log(d2.page).locator("[data-role=user]").last().scrollIntoViewIfNeeded();
        await d2.page.screenshot({ path: `${shots}/history.png` });
      }

      // A file the model is not given (not text, image or PDF): the answer says so on both devices.
      await pickFiles(d1.page, [{ name: "data.bin", mimeType: "application/octet-stream",
                                  buffer: Buffer.from([0, 159, 146, 150, 255, 1, 2, 3]) }]);
      await readyChip(d1.page, "data.bin");
      await messageBox(d1.page).fill("and this one");
      await messageBox(d1.page).press("Enter");
      const noticesByAnswer = (p) => log(p).locator("[data-role=assistant]")
        .evaluateAll((els) => els.map((e) => [...e.querySelectorAll(".msg-notice")].map((n) => n.textContent)));
      for (const p of [d1.page, d2.page]) {
        await until(() => noticesByAnswer(p), (n) => n.length === 3 && n[2].length > 0, { what: "the notice" });
        await waitIdle(p);
      }
      const notices = [await noticesByAnswer(d1.page), await noticesByAnswer(d2.page)];
      if (shots) await log(d1.page).locator("[data-role=assistant]").last().screenshot({ path: `${shots}/notice.png` });
      const answers = [await assistantTexts(d1.page), await assistantTexts(d2.page)];

      // A file that is not an image is a chip: a click saves it under its name.
      const [download] = await Promise.all([
        d2.page.waitForEvent("download"),
        log(d2.page).locator(".file-chip").filter({ hasText: "notes.txt" }).click(),
      ]);
      const saved = { name: download.suggestedFilename(), text: await download.createReadStream().then(async (s) => {
        const parts = [];
        for await (const c of s) parts.push(c);
        return Buffer.concat(parts).toString();
      }) };

      // A file dropped beside the message box is refused (the browser would otherwise open it in the app's place).
      const dropBeside = await log(d1.page).evaluate((el) => {
        const data = new DataTransfer();
        data.items.add(new File(["x"], "beside.txt", { type: "text/plain" }));
        const ev = new DragEvent("drop", { dataTransfer: data, bubbles: true, cancelable: true });
        return { refused: !el.dispatchEvent(ev), chips: document.querySelectorAll(".chip").length };
      });

      // axe with chips in the composer and files in the history.
      await pickFiles(d1.page, [{ name: "more.txt", mimeType: "text/plain", buffer: Buffer.from("more") }]);
      await readyChip(d1.page, "more.txt");
      const axe = [...await axeScan(d1.page), ...await axeScan(d2.page)];

      // Leaving the chat revokes the thumbnail's blob: URL.
      const src = await log(d1.page).locator(".attachments img").getAttribute("src");
      // Loaded as an image (the policy lets images, not connections, come from blob:).
      const alive = (u) => new Promise((ok) => Object.assign(new Image(), {
        onload: () => ok("alive"), onerror: () => ok("revoked"), src: u }));
      const before = await d1.page.evaluate(alive, src);
      await d1.page.getByRole("link", { name: "Devices" }).click();
      await d1.page.getByRole("heading", { name: "Devices" }).waitFor();
      const known = problems().length;
      const after = await d1.page.evaluate(alive, src);
      // The notice is kept with the answer: device 2 still shows it after a reload.
      await d2.page.reload();
      const noticesAfterReload = await until(() => noticesByAnswer(d2.page), (n) => n.length === 3 && n[2].length > 0,
        { what: "the notice after a reload" });
      // Expected in the browser's log: the refused upload's 413, and the revoked URL this probe loaded.
      const unexpected = problems().filter((p, i) => !/status of 413/.test(p)
                                                     && !(i >= known && /ERR_FILE_NOT_FOUND/.test(p)));
      return { picked, refusal, blockedAnnouncement, boxWhileBlocked, kept, saved, notes, axe, dropBeside, notices, answers,
               noticesAfterReload, blobUrl: { before, after }, problems: unexpected };
    });
  },

  /** A queued message with two files: device 2 takes one off while editing; both devices show the rest. */
  async queued_files_edit({ browser, url, token, sessionId, checkpoint }) {
    return devices(browser, url, [{ token }, { token }], async ([d1, d2], problems) => {
      await openApp(d1.page, `/s/${sessionId}`);
      await openApp(d2.page, `/s/${sessionId}`);
      const count = (p) => queueItem(p, 0).locator(".queue-attachments").textContent();
      const counts = () => Promise.all([d1.page, d2.page].map(count));
      await checkpoint("before", { counts: await counts() });
      await queueItem(d2.page, 0).getByRole("button", { name: "Edit" }).click();
      const files = d2.page.getByRole("list", { name: "Files of this message" });
      const editing = await files.locator(".chip-name").allTextContents();
      await files.getByRole("button", { name: "Remove notes.txt from the queued message" }).click();
      await d2.page.getByRole("button", { name: "Save" }).click();
      await until(counts, (c) => c.every((t) => t === "1 attachment"), { what: "one file left on both devices" });
      await checkpoint("after", { counts: await counts() });
      return { editing, problems: problems() };
    });
  },
};
