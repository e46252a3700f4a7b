// Drives the /admin page in headless Chromium (Debian's /usr/bin/chromium, through playwright-core) and
// prints what a person would see, as one JSON line on stdout, for tests/http/admin/test_admin_browser.py to check.
//
//   CHATSYNC_URL=http://127.0.0.1:PORT CHATSYNC_ADMIN_TOKEN=... CHATSYNC_OPEN_TITLE=<title to click> node admin_page.mjs
import { chromium } from "playwright-core";

const url = process.env.CHATSYNC_URL;
const token = process.env.CHATSYNC_ADMIN_TOKEN;
const openTitle = process.env.CHATSYNC_OPEN_TITLE;

const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] });
try {
  const page = await browser.newPage();
  const dialogs = [];
  const pageErrors = [];
  const cspViolations = [];
  page.on("dialog", async (d) => { dialogs.push(d.message()); await d.dismiss(); });
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  page.on("console", (m) => { if (/Content Security Policy/.test(m.text())) cspViolations.push(m.text()); });

  await page.goto(url + "/admin");
  const beforeToken = await page.locator("#sessions tr").count();
  await page.fill("#token", token);
  await page.click("#auth button");
  await page.locator("#sessions tr").first().waitFor();
  await page.waitForFunction(() => document.getElementById("stats").textContent.length > 0);

  const rows = await page.locator("#sessions tr").evaluateAll((trs) =>
    trs.map((tr) => Array.from(tr.children, (td) => td.textContent)));
  const stats = await page.textContent("#stats");
  const injected = await page.locator("#sessions img, #sessions script").count();

  await page.locator("#sessions tr", { hasText: openTitle }).click();
  await page.locator("#events").filter({ hasText: "queue-message-added" }).waitFor();
  const detailTitle = await page.textContent("#detail-title");
  const detail = JSON.parse(await page.textContent("#detail-json"));
  const events = (await page.textContent("#events")).trim().split("\n").map((l) => l.split(" ").slice(0, 2));

  // A filter that matches nothing empties the table.
  await page.selectOption("#status", "running");
  await page.click("#filter button");
  await page.waitForFunction(() => document.querySelectorAll("#sessions tr").length === 0);

  // Reloading the tab keeps the token (sessionStorage) and lists again without asking.
  await page.selectOption("#status", "");
  await page.reload();
  await page.locator("#sessions tr").first().waitFor();
  const afterReload = await page.locator("#sessions tr").count();

  console.log(JSON.stringify({ beforeToken, rows, stats, injected, detailTitle, detail, events, afterReload,
                               dialogs, pageErrors, cspViolations }));
} finally {
  await browser.close();
}
