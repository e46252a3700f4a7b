// Finding and keeping chats, and code in answers: search, pins and archive on two devices, export and import,
// code blocks (copy, language, highlighting loaded on demand, settled blocks left alone while an answer
// streams), the tab's title, shortcuts and the image preview. Run by app_driver.mjs for tests/web; every
// control is found by its role and accessible name.
import { readFile } from "node:fs/promises";
import { axeScan, devices, openApp, until } from "./app_helpers.mjs";

const nav = (page) => page.getByRole("navigation", { name: "Sessions" });
const searchBox = (page) => nav(page).getByRole("searchbox", { name: "Search chats" });
const results = (page) => nav(page).getByRole("list", { name: "Search results" });
const listTitles = (list) => list.locator(".session-title").allTextContents();
/** A session's row in a list of the sidebar, by its link's name. */
const row = (list, name) => list.getByRole("listitem").filter({ has: list.page().getByRole("link", { name }) });
const log = (page) => page.getByRole("log", { name: "Conversation" });

/** Clicks a row's action: the actions show on hover (and always on phones and the open chat). */
async function action(list, name, button) {
  const r = row(list, name);
  await r.hover();
  await r.getByRole("button", { name: button, exact: true }).click();
}

export const organiseScenarios = {
  /** Search finds a message's text, follows a rename made on the other device, and takes in a chat renamed to
   * match; Ctrl+K reaches the box. */
  async search({ browser, url, token, sessionId, checkpoint }) {
    return devices(browser, url, [{ token }, { token, colorScheme: "dark" }], async ([d1, d2], problems) => {
      await openApp(d1.page, "/devices");
      await openApp(d2.page, "/devices");
      await d1.page.keyboard.press("Control+k");
      const focused = await searchBox(d1.page).evaluate((el) => el === document.activeElement);
      await d1.page.keyboard.type("seedlings");
      await until(() => listTitles(results(d1.page)), (t) => t.length === 1 && t[0] === "Garden plans",
                  { what: "the chat whose message mentions seedlings" });
      const axe = await axeScan(d1.page);
      // the other device renames the chat found: the result follows
      await action(nav(d2.page), "Garden plans", "Rename");
      await nav(d2.page).getByRole("textbox", { name: "Chat title" }).fill("Greenhouse");
      await nav(d2.page).getByRole("button", { name: "Save" }).click();
      await until(() => listTitles(results(d1.page)), (t) => t.length === 1 && t[0] === "Greenhouse",
                  { what: "the rename in the results" });
      await checkpoint("renamed", {});
      // a chat renamed (elsewhere) to match joins the results
      await action(nav(d2.page), "Other things", "Rename");
      await nav(d2.page).getByRole("textbox", { name: "Chat title" }).fill("Seedlings schedule");
      await nav(d2.page).getByRole("button", { name: "Save" }).click();
      const both = await until(() => listTitles(results(d1.page)), (t) => t.length === 2,
                               { what: "the newly matching chat" });
      // nothing matches: said so; clearing the box brings the list back
      await searchBox(d1.page).fill("no-such-words-anywhere");
      await nav(d1.page).getByText("No chats match “no-such-words-anywhere”.").waitFor();
      await searchBox(d1.page).press("Escape");
      await results(d1.page).waitFor({ state: "detached" });
      const groups = await nav(d1.page).getByRole("heading", { level: 2 }).allTextContents();
      return { focused, axe, both, groups, problems: problems() };
    });
  },

  /** The sidebar's sections, in order, and which of the given chats each lists. */
  async groups({ browser, url, token, titles }) {
    return devices(browser, url, [{ token }], async ([d], problems) => {
      await openApp(d.page, "/devices");
      await row(nav(d.page), titles[0]).waitFor();
      const headings = await nav(d.page).getByRole("heading", { level: 2 }).allTextContents();
      const where = {};
      for (const heading of headings) {
        for (const title of await listTitles(nav(d.page).getByRole("list", { name: heading, exact: true }))) {
          if (titles.includes(title)) where[title] = heading;
        }
      }
      return { headings, where, problems: problems() };
    });
  },

  /** Pin on one device moves the chat into "Pinned" on the other; archive hides it from the list there, and
   * "Archived chats" shows it until it is restored. */
  async pin({ browser, url, token, checkpoint }) {
    return devices(browser, url, [{ token }, { token }], async ([d1, d2], problems) => {
      await openApp(d1.page, "/devices");
      await openApp(d2.page, "/devices");
      const pinned = (page) => nav(page).getByRole("list", { name: "Pinned" });
      const today = (page) => nav(page).getByRole("list", { name: "Today" });
      await row(today(d2.page), "Pin me").waitFor();
      await action(today(d1.page), "Pin me", "Pin");
      await row(pinned(d2.page), "Pin me").waitFor();
      await row(today(d2.page), "Pin me").waitFor({ state: "detached" });
      const firstOnOther = await nav(d2.page).locator(".session-title").first().textContent();
      const axe = await axeScan(d2.page);
      await checkpoint("pinned", {});
      await action(pinned(d2.page), "Pin me", "Unpin");
      await row(today(d1.page), "Pin me").waitFor();
      await pinned(d1.page).waitFor({ state: "detached" });
      await checkpoint("unpinned", {});
      await action(today(d1.page), "Pin me", "Archive");
      await row(today(d2.page), "Pin me").waitFor({ state: "detached" });
      await checkpoint("archived", {});
      const archivedButton = nav(d2.page).getByRole("button", { name: "Archived chats" });
      await archivedButton.click();
      const archived = nav(d2.page).getByRole("list", { name: "Archived chats" });
      await row(archived, "Pin me").waitFor();
      const pressed = await archivedButton.getAttribute("aria-pressed");
      const axeArchived = await axeScan(d2.page);
      await action(archived, "Pin me", "Unarchive");
      await row(archived, "Pin me").waitFor({ state: "detached" });
      await row(today(d1.page), "Pin me").waitFor();
      await archivedButton.click();
      await row(today(d2.page), "Pin me").waitFor();
      await checkpoint("restored", {});
      return { firstOnOther, axe, axeArchived, pressed, problems: problems() };
    });
  },

  /** Export a chat as JSON and Markdown on one device; import the JSON on the other: it opens as a new chat. */
  async exportImport({ browser, url, token, checkpoint }) {
    return devices(browser, url, [{ token }, { token }], async ([d1, d2], problems) => {
      await openApp(d1.page, "/devices");
      await openApp(d2.page, "/devices");
      const save = async (format) => {
        await action(nav(d1.page), "Exported chat", "Export");
        const [download] = await Promise.all([
          d1.page.waitForEvent("download"),
          nav(d1.page).getByRole("group", { name: "Export Exported chat as" }).getByRole("button", { name: format })
            .click(),
        ]);
        const path = await download.path();
        return { name: download.suggestedFilename(), path, text: await readFile(path, "utf8") };
      };
      const json = await save("JSON");
      const markdown = await save("Markdown");
      const [chooser] = await Promise.all([d2.page.waitForEvent("filechooser"),
                                           nav(d2.page).getByRole("button", { name: "Import" }).click()]);
      await chooser.setFiles(json.path);
      await d2.page.waitForURL(/\/s\//);
      const importedId = decodeURIComponent(new URL(d2.page.url()).pathname.split("/").pop());
      await log(d2.page).locator("[data-role=assistant]").first().waitFor();
      const shown = await log(d2.page).locator("[data-role]").evaluateAll((ms) => ms.map((m) => m.dataset.role));
      const codeShown = await log(d2.page).getByRole("group", { name: "Code: python" }).count();
      const announced = await d2.page.getByRole("status", { name: "Answer status" }).textContent();
      const axe = await axeScan(d2.page);
      await checkpoint("imported", { importedId });
      return { json: { name: json.name, text: json.text }, markdown: { name: markdown.name, text: markdown.text },
               importedId, shown, codeShown, announced, axe, problems: problems() };
    });
  },

  /** A code block: "Copy" puts the code on the clipboard; highlighting arrives once the highlighter is loaded,
   * which no page loads before a code block asks; while an answer streams, settled blocks are left alone. */
  async codeBlock({ browser, url, token, plainId, codeId, streamId, streamText }) {
    const out = {};
    for (const colorScheme of ["light", "dark"]) {
      out[colorScheme] = await devices(browser, url, [{ token, colorScheme }], async ([d], problems) => {
        await d.context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: url });
        const chunks = [];
        d.page.on("request", (r) => { if (/\/assets\/highlight-[^/]*\.js$/.test(r.url())) chunks.push(r.url()); });
        await openApp(d.page, `/s/${plainId}`);
        await log(d.page).locator("[data-role=assistant]").first().waitFor();
        const loadedBeforeCode = chunks.length;
        await nav(d.page).getByRole("link", { name: "Code chat" }).click();
        const block = log(d.page).getByRole("group", { name: "Code: python" });
        await block.locator("code.hljs .hljs-keyword").first().waitFor();
        const keywords = await block.locator(".hljs-keyword").allTextContents();
        const label = await block.locator(".code-lang").textContent();
        await block.getByRole("button", { name: "Copy" }).click();
        const copied = await until(() => d.page.evaluate(() => navigator.clipboard.readText()), (t) => t.includes("def"),
                                   { what: "the code on the clipboard" });
        const scrolls = await block.locator("pre").evaluate((pre) => getComputedStyle(pre).overflowX);
        const wide = await block.locator("pre").evaluate((pre) => pre.scrollWidth > pre.clientWidth);
        const axe = await axeScan(d.page);
        return { loadedBeforeCode, chunks: chunks.length, keywords, label, copied, scrolls, wide, axe,
                 problems: problems() };
      });
    }
    // Streaming: the first block settles while the rest of the answer streams; it stays the same node, highlighted.
    out.streaming = await devices(browser, url, [{ token }], async ([d], problems) => {
      await openApp(d.page, `/s/${streamId}`);
      await d.page.getByRole("textbox", { name: "Message" }).fill(streamText);
      await d.page.getByRole("textbox", { name: "Message" }).press("Enter");
      const answer = log(d.page).locator("[data-role=assistant][data-status=streaming]");
      const first = answer.getByRole("group", { name: "Code: js" });
      await first.locator("code.hljs .hljs-keyword").first().waitFor(); // settled, then highlighted
      await first.evaluate((el) => { el.querySelector("code").dataset.seen = "1"; });
      const before = await answer.locator(".md").textContent();
      await until(() => answer.locator(".md").textContent(), (t) => t.length > before.length + 40,
                  { what: "more of the answer" });
      const kept = await first.evaluate((el) => el.querySelector("code").dataset.seen === "1"
                                                && el.querySelector("code").classList.contains("hljs"));
      const stillStreaming = await answer.count();
      await log(d.page).locator("[data-role=assistant][data-status=complete]").last().waitFor();
      return { kept, stillStreaming, problems: problems() };
    });
    return out;
  },

  /** The tab shows the chat's title, renamed elsewhere too; Ctrl+Shift+O starts a new chat; a thumbnail opens
   * the image at full size in a dialog. */
  async comfort({ browser, url, token, sessionId, checkpoint }) {
    return devices(browser, url, [{ token }], async ([d], problems) => {
      const { page } = d;
      await openApp(page, `/s/${sessionId}`);
      const titled = await until(() => page.title(), (t) => t === "Tab title – chatsync", { what: "the tab's title" });
      await checkpoint("opened", {});
      const renamed = await until(() => page.title(), (t) => t === "Renamed tab – chatsync", { what: "the rename" });
      const thumb = log(page).getByRole("button", { name: "square.png" });
      await thumb.locator("img").waitFor();
      await thumb.click();
      const dialog = page.getByRole("dialog", { name: "square.png" });
      await dialog.waitFor();
      const big = await dialog.getByRole("img", { name: "square.png" }).evaluate((img) => img.complete && img.naturalWidth);
      const axe = await axeScan(page);
      await page.keyboard.press("Escape");
      await dialog.waitFor({ state: "detached" });
      const focusBack = await thumb.evaluate((el) => el === document.activeElement);
      await page.keyboard.press("Control+Shift+O");
      await page.waitForURL((u) => !u.pathname.endsWith(sessionId) && /\/s\//.test(u.pathname));
      const newId = decodeURIComponent(new URL(page.url()).pathname.split("/").pop());
      const newTitle = await until(() => page.title(), (t) => t === "New chat – chatsync", { what: "the new tab title" });
      const composerFocused = await page.getByRole("textbox", { name: "Message" })
        .evaluate((el) => el === document.activeElement);
      return { titled, renamed, big, axe, focusBack, newId, newTitle, composerFocused, problems: problems() };
    });
  },
};
