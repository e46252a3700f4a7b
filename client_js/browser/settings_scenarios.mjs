// The web app's session settings and device scenarios, run by app_driver.mjs for tests/web/test_web_settings.py.
// Controls are found by role and accessible name.
import decodeQR from "qr/decode.js";
import { axeScan, connection, deliverPush, devices, notifications, openApp, until, words } from "./app_helpers.mjs";

const log = (page) => page.getByRole("log", { name: "Conversation" });
const messageBox = (page) => page.getByRole("textbox", { name: "Message" });
const pathOf = (link) => new URL(link).pathname + new URL(link).hash;
const deviceList = (page) => page.getByRole("list", { name: "Signed-in devices" });
const deviceNames = async (page) => deviceList(page).getByRole("listitem").locator(".device-name").allTextContents();

/** What a phone's camera would read from the QR code on the page: the SVG's modules drawn as pixels (6 per
 * module, white around), decoded by the same library's reader. */
async function scanQr(page, name) {
  const svg = page.getByRole("img", { name });
  const size = Number(await svg.getAttribute("data-modules"));
  const path = await svg.locator("path").getAttribute("d");
  const viewBox = (await svg.getAttribute("viewBox")).split(" ").map(Number);
  const scale = 6;
  const side = viewBox[2] * scale;
  const data = new Uint8Array(side * side * 4).fill(255);
  for (const [, x, y] of path.matchAll(/M(\d+) (\d+)h1v1h-1z/g)) {
    for (let dy = 0; dy < scale; dy++) {
      for (let dx = 0; dx < scale; dx++) {
        const at = ((Number(y) * scale + dy) * side + Number(x) * scale + dx) * 4;
        data[at] = data[at + 1] = data[at + 2] = 0;
      }
    }
  }
  return { size, text: decodeQR({ width: side, height: side, data }) };
}

const assistantTexts = async (page) => (await log(page).locator("[data-role=assistant] .md").allTextContents())
  .map((t) => t.replace(/\s+/g, " ").trim());

export const settingsScenarios = {
  /** "Session settings" on device 1: the session's unavailable provider is shown with why; moving to another
   * provider does not keep its model; model, system prompt and a built-in tool are saved, show on device 2, and
   * the next answer is made with them (the echo model's `/describe` says what it got). */
  async session_settings({ browser, url, token, sessionId, checkpoint }) {
    return devices(browser, url, [{ token }, { token }], async ([d1, d2], problems) => {
      await openApp(d1.page, `/s/${sessionId}`);
      await openApp(d2.page, `/s/${sessionId}`);
      await d1.page.getByRole("button", { name: "Session settings" }).click();
      const dialog = d1.page.getByRole("dialog", { name: "Session settings" });
      const provider = dialog.getByRole("combobox", { name: "Provider" });
      const model = dialog.getByRole("combobox", { name: "Model" });
      await dialog.getByRole("checkbox", { name: "calculator" }).waitFor(); // the server's tools arrived
      const before = { provider: await provider.inputValue(), model: await model.inputValue() };
      const hint = await until(() => dialog.locator("#provider-hint").textContent(), (t) => t.includes("OLLAMA_HOST"),
                               { what: "the reason ollama is unavailable" });
      const openaiDisabled = await provider.locator("option", { hasText: "OpenAI" }).isDisabled();
      const declared = await dialog.getByRole("list", { name: "Declared tools" }).getByRole("listitem").allTextContents();
      const axe = await axeScan(d1.page);
      await provider.selectOption("echo");
      const modelAfterSwitch = await model.inputValue();
      await model.fill("echo-large");
      await dialog.getByRole("textbox", { name: "System prompt" }).fill("Answer like a pirate.");
      await dialog.getByRole("checkbox", { name: "calculator" }).check();
      await dialog.getByRole("combobox", { name: "While answering, a new message" }).selectOption("steer");
      await dialog.getByRole("button", { name: "Save" }).click();
      await dialog.waitFor({ state: "detached" });
      await d2.page.getByText("Model: echo / echo-large").waitFor();
      await checkpoint("saved", {});

      await messageBox(d1.page).fill("What did you get?\n/describe");
      await messageBox(d1.page).press("Enter");
      const answer = await until(() => assistantTexts(d2.page), (t) => t.some((a) => a.includes("[model") && a.endsWith("]")),
                                 { what: "the whole answer on device 2" });
      // Opened again, the dialog shows what was saved.
      await d2.page.getByRole("button", { name: "Session settings" }).click();
      const again = d2.page.getByRole("dialog", { name: "Session settings" });
      await again.getByRole("checkbox", { name: "calculator" }).waitFor();
      const reopened = {
        prompt: await again.getByRole("textbox", { name: "System prompt" }).inputValue(),
        calculator: await again.getByRole("checkbox", { name: "calculator" }).isChecked(),
        model: await again.getByRole("combobox", { name: "Model" }).inputValue(),
      };
      await again.getByRole("button", { name: "Cancel" }).click();
      await again.waitFor({ state: "detached" });
      return { before, hint, openaiDisabled, declared, modelAfterSwitch, answer: answer.find((a) => a.includes("[model")),
               reopened, axe, problems: problems() };
    });
  },

  /** "Link a device" with a "Device name": a QR code of the link; the device that opens it signs in under that
   * name and shows on the Devices page without a reload, as does a link made elsewhere; revoking asks first;
   * a linked device's "Sign out" forgets and revokes its token. */
  async link_qr_and_live_devices({ browser, url, token, account, name, checkpoint }) {
    return devices(browser, url, [{ token }, {}, {}], async ([d1, d2, d3], problems) => {
      await openApp(d1.page, "/devices");
      await deviceList(d1.page).waitFor();
      await d1.page.getByRole("textbox", { name: "Device name" }).fill(name);
      await d1.page.getByRole("button", { name: "Link a device" }).click();
      const link = await d1.page.getByRole("textbox", { name: "Sign-in link" }).inputValue();
      const qr = await scanQr(d1.page, `QR code of the sign-in link for ${name}`);
      const axe = await axeScan(d1.page);

      await d2.page.goto(pathOf(link));
      await d2.page.getByRole("button", { name: `Sign in as ${account}` }).click();
      await connection(d2.page).getByText("connected").waitFor();
      // No reload on device 1: its list follows.
      await deviceList(d1.page).getByText(name, { exact: true }).waitFor();
      const linkGone = await d1.page.getByRole("textbox", { name: "Sign-in link" }).count() === 0;
      const afterSignIn = await deviceNames(d1.page);

      // A link made somewhere else (the test, as another device) shows up too.
      const elsewhere = await checkpoint("signed-in", {});
      const pending = d1.page.getByRole("list", { name: "Pending sign-in links" });
      await pending.getByText(`For “${elsewhere.deviceName}”`).waitFor();

      // Revoking asks; Cancel keeps the device.
      const row = deviceList(d1.page).getByRole("listitem").filter({ hasText: name });
      await row.getByRole("button", { name: "Revoke" }).click();
      await row.getByRole("button", { name: "Cancel" }).click();
      const keptAfterCancel = await row.count();
      await checkpoint("cancelled", {});

      // The link made elsewhere signs device 3 in; device 3 signs out.
      await d3.page.goto(pathOf(elsewhere.url));
      await d3.page.getByRole("button", { name: `Sign in as ${account}` }).click();
      await connection(d3.page).getByText("connected").waitFor();
      await deviceList(d1.page).getByText(elsewhere.deviceName, { exact: true }).waitFor();
      await d3.page.getByRole("button", { name: "Sign out" }).click();
      await d3.page.getByRole("textbox", { name: "Access token" }).waitFor();
      const d3Token = await d3.page.evaluate(() => localStorage.getItem("chatsync.token"));
      await deviceList(d1.page).getByText(elsewhere.deviceName, { exact: true }).waitFor({ state: "detached" });

      await row.getByRole("button", { name: "Revoke" }).click();
      await row.getByRole("button", { name: "Yes, revoke" }).click();
      await d2.page.getByRole("textbox", { name: "Access token" }).waitFor(); // device 2 is signed out
      await row.waitFor({ state: "detached" });
      return { link, qr, axe, linkGone, afterSignIn, keptAfterCancel, d3Token, problems: problems() };
    });
  },

  /** A file picked while the server cannot be reached: the chip says so (not the browser's raw "Failed to
   * fetch"), offers Retry, and once the server answers again it uploads and goes with the message. */
  async upload_outage({ browser, url, token, sessionId }) {
    return devices(browser, url, [{ token }], async ([d], problems) => {
      const { page } = d;
      await openApp(page, `/s/${sessionId}`);
      await page.route("**/files", (route) => route.abort("connectionrefused"));
      const [chooser] = await Promise.all([page.waitForEvent("filechooser"),
                                           page.getByRole("button", { name: "Attach files" }).click()]);
      await chooser.setFiles([{ name: "outage.txt", mimeType: "text/plain", buffer: Buffer.from("kept through it") }]);
      const chip = page.getByRole("list", { name: "Files to send" }).getByRole("listitem").filter({ hasText: "outage.txt" });
      await chip.and(page.locator("[data-state=failed]")).waitFor();
      const failedText = (await chip.textContent()).replace(/\s+/g, " ");
      await messageBox(page).fill("with the file");
      await messageBox(page).press("Enter");
      const heldBack = await messageBox(page).inputValue(); // nothing is sent without its file
      await page.unroute("**/files");
      await chip.getByRole("button", { name: "Retry uploading outage.txt" }).click();
      await chip.and(page.locator("[data-state=ready]")).waitFor();
      await messageBox(page).press("Enter");
      const answer = await until(() => assistantTexts(page), (t) => t.some((a) => a.includes("[received outage.txt")),
                                 { what: "the answer naming the file" });
      // The browser logs the refused requests themselves; the app logs nothing else.
      return { failedText, heldBack, answer, problems: problems().filter((p) => !p.includes("net::ERR_CONNECTION_REFUSED")) };
    });
  },

  /** Approved on one device: after a reload, and on a device that opens the chat only afterwards, the card
   * still says on which device it was approved. */
  async approval_after_reload({ browser, url, token, sessionId }) {
    return devices(browser, url, [{ token }, { token }], async ([d1, d2], problems) => {
      await openApp(d1.page, `/s/${sessionId}`);
      await messageBox(d1.page).fill('/tool calculator {"expression": "6*7"}');
      await messageBox(d1.page).press("Enter");
      await log(d1.page).getByRole("button", { name: "Approve" }).click();
      const decision = log(d1.page).locator(".tool-decision");
      await until(() => assistantTexts(d1.page), (t) => t.some((a) => a.includes("returned: 42")),
                  { what: "the answer after the tool ran" });
      const live = await decision.textContent();
      await d1.page.reload();
      await log(d1.page).getByText("returned: 42").waitFor();
      const reloaded = await decision.textContent();
      await openApp(d2.page, `/s/${sessionId}`);
      await log(d2.page).getByText("returned: 42").waitFor();
      const later = await log(d2.page).locator(".tool-decision").textContent();
      return { live, reloaded, later, problems: problems() };
    });
  },

  /** "New chat" on its way (the server has not made it yet) while the person writes and presses Enter: the
   * message goes to the new chat once it opens, never to the chat still on screen. A second press meanwhile
   * opens the same new chat. */
  async send_while_new_chat_is_made({ browser, url, token, sessionId }) {
    return devices(browser, url, [{ token }], async ([d], problems) => {
      const { page } = d;
      const held = [];
      let holding = true;
      await page.routeWebSocket(/\/trpc/, (ws) => {
        const server = ws.connectToServer();
        ws.onMessage((m) => {
          if (holding && String(m).includes('"session.create"')) held.push(() => server.send(m));
          else server.send(m);
        });
      });
      await openApp(page, `/s/${sessionId}`);
      const old = page.url();
      await log(page).getByText("already here").first().waitFor();
      const nav = page.getByRole("navigation", { name: "Sessions" });
      await nav.getByRole("button", { name: "New chat" }).click();
      await until(async () => held.length, (n) => n === 1, { what: "the new chat asked for" });
      await nav.getByRole("button", { name: "New chat" }).click(); // again, while the first is on its way
      await messageBox(page).fill("written before the chat existed");
      await messageBox(page).press("Enter");
      const boxWhileHeld = await messageBox(page).inputValue();
      const urlWhileHeld = page.url();
      holding = false;
      for (const release of held.splice(0)) release();
      await page.waitForURL((u) => u.href !== old);
      await log(page).getByText("written before the chat existed").first().waitFor();
      await page.getByRole("status", { name: "Answer status" }).getByText("Answer finished").waitFor();
      return { old, urlWhileHeld, boxWhileHeld, opened: page.url(), problems: problems() };
    });
  },

  /** A phone, a user with no chats yet: the empty state has its own "New chat" (the sidebar's is hidden); New
   * chat again reuses the empty chat; only the open chat's row shows its actions; the status line does not
   * carry "Answer finished" into another chat; an empty queue shows no panel. */
  async phone_first_chats({ browser, url, token }) {
    return devices(browser, url, [{ token, viewport: { width: 390, height: 844 } }], async ([d], problems) => {
      const { page } = d;
      await openApp(page, "/");
      const main = page.getByRole("main");
      await main.getByText("No chats yet.").waitFor();
      const emptyButtonVisible = await main.getByRole("button", { name: "New chat" }).isVisible();
      const sidebarButtonVisible = await page.getByRole("navigation", { name: "Sessions" })
        .getByRole("button", { name: "New chat" }).isVisible();
      await main.getByRole("button", { name: "New chat" }).click();
      await page.waitForURL(/\/s\//);
      const first = page.url();
      await page.getByRole("button", { name: "Chats" }).click();
      const nav = page.getByRole("navigation", { name: "Sessions" });
      await nav.getByRole("button", { name: "New chat" }).click();
      await messageBox(page).waitFor();
      const again = page.url();

      await messageBox(page).fill("hello from the phone");
      await messageBox(page).press("Enter");
      const status = page.getByRole("status", { name: "Answer status" });
      await status.getByText("Answer finished").waitFor();
      const queuePanels = await page.getByRole("heading", { name: /queued/ }).count();
      await page.getByRole("button", { name: "Chats" }).click();
      await nav.getByRole("button", { name: "New chat" }).click();
      await page.waitForURL((u) => u.href !== first);
      const second = page.url();
      await messageBox(page).waitFor();
      const statusInNewChat = await status.textContent();
      await page.getByRole("button", { name: "Chats" }).click();
      const rows = nav.getByRole("listitem");
      await until(() => rows.count(), (n) => n === 2, { what: "two chats in the list" });
      const renameVisible = await Promise.all([0, 1].map(async (i) => ({
        current: await rows.nth(i).getByRole("link").getAttribute("aria-current") === "page",
        rename: await rows.nth(i).getByRole("button", { name: "Rename" }).isVisible(),
      })));
      const axe = await axeScan(page);
      return { emptyButtonVisible, sidebarButtonVisible, first, again, second, statusInNewChat, queuePanels,
               renameVisible, axe, problems: problems() };
    });
  },

  /** A hidden tab with no push subscription: an answer that finishes meanwhile is shown with the Notification
   * API (the server's push reaches nobody here); looking at the chat again withdraws it. */
  async hidden_tab_notifies({ browser, url, token, sessionId, checkpoint }) {
    return devices(browser, url, [{ token }], async ([d], problems) => {
      const { page } = d;
      await d.context.grantPermissions(["notifications"], { origin: new URL(url).origin });
      await openApp(page, `/s/${sessionId}`);
      await page.evaluate(async () => { await navigator.serviceWorker.ready; });
      const setVisibility = (state) => page.evaluate((state) => {
        Object.defineProperty(document, "visibilityState", { configurable: true, get: () => state });
        Object.defineProperty(document, "hidden", { configurable: true, get: () => state === "hidden" });
        document.dispatchEvent(new Event("visibilitychange"));
      }, state);
      await setVisibility("hidden");
      await checkpoint("hidden", {}); // the test waits until the server has the tab as not visible, then sends
      const shown = await until(() => notifications(page), (list) => list.some((n) => n.sessionId === sessionId),
                                { what: "the tab's notification" });
      await setVisibility("visible");
      await until(() => notifications(page), (list) => !list.some((n) => n.sessionId === sessionId),
                  { what: "the notification withdrawn once the chat is looked at" });
      return { shown: shown.filter((n) => n.sessionId === sessionId), problems: problems() };
    });
  },

  /** Pushes about one chat: each newer one withdraws what this device showed of the chat before. */
  async newer_push_withdraws_older({ browser, url, token, payloads }) {
    return devices(browser, url, [{ token }], async ([d], problems) => {
      await openApp(d.page, "/devices");
      await deliverPush(d, url, payloads);
      return { shown: await notifications(d.page), problems: problems() };
    });
  },

  /** An approval pushed to this device (`payload`: what the server sent its push service), shown by the service
   * worker with Approve and Deny; Approve is pressed — the worker's own click handler runs on that notification,
   * as the browser runs it for a click — and the worker decides the call on the server. */
  async approve_from_notification({ browser, url, token, payload }) {
    return devices(browser, url, [{ token }], async ([d], problems) => {
      await openApp(d.page, "/devices");
      await deliverPush(d, url, [payload]);
      const shown = (await notifications(d.page)).filter((n) => n.sessionId === payload.sessionId);
      const worker = d.context.serviceWorkers()[0] ?? await d.context.waitForEvent("serviceworker");
      await worker.evaluate(async (sessionId) => {
        const [note] = (await self.registration.getNotifications())
          .filter((n) => n.data?.sessionId === sessionId && n.actions.some((a) => a.action === "approve"));
        await onNotificationClick(note, "approve");
      }, payload.sessionId);
      const after = await until(() => notifications(d.page), (list) => list.some((n) => n.sessionId === payload.sessionId &&
        n.body.startsWith("Approved")), { what: "the worker's outcome notification" });
      return { shown, after: after.filter((n) => n.sessionId === payload.sessionId), problems: problems() };
    });
  },

  /** A paused, empty queue shows no panel; while an answer runs, "Send now" says it stops that answer. */
  async queue_panel_words({ browser, url, token, sessionId, checkpoint }) {
    return devices(browser, url, [{ token }], async ([d], problems) => {
      const { page } = d;
      await openApp(page, `/s/${sessionId}`);
      await page.getByRole("heading", { name: "Paused and empty", level: 1 }).waitFor(); // the chat has loaded
      const emptyPanels = await page.getByRole("heading", { name: /queued/ }).count();
      await messageBox(page).fill(words(400, "long"));
      await messageBox(page).press("Enter");
      await log(page).locator("[data-role=assistant][data-status=streaming]").waitFor();
      await checkpoint("answering", {}); // the test queues a message behind the answer
      const heading = await page.getByRole("heading", { name: /queued/ }).textContent();
      const sendNow = page.getByRole("list", { name: "Queued messages" }).getByRole("button", { name: "Send now" });
      const description = await sendNow.evaluate((b) => document.getElementById(b.getAttribute("aria-describedby"))?.textContent ?? "");
      await page.getByRole("button", { name: "Stop" }).click();
      return { emptyPanels, heading, description, problems: problems() };
    });
  },

  /** A device renamed in the Devices page. */
  async rename_device({ browser, url, token }) {
    return devices(browser, url, [{ token }], async ([d1], problems) => {
      await openApp(d1.page, "/devices");
      const list = d1.page.getByRole("list", { name: "Signed-in devices" });
      const mine = list.getByRole("listitem").filter({ hasText: "(this device)" });
      await mine.getByRole("button", { name: "Rename" }).click();
      // the item becomes a form (its "(this device)" label gives way to the name field)
      await list.getByRole("textbox", { name: "Device name" }).fill("Kitchen laptop");
      await list.getByRole("button", { name: "Save" }).click();
      await list.getByText("Kitchen laptop (this device)").waitFor();
      return { problems: problems() };
    });
  },
};
