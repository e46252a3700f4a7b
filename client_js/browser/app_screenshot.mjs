// Takes the screenshots in docs/web.md: a real server (temporary SQLite, the echo model), a few chats, one with
// a rendered answer, an image attached, a tool call waiting for approval, two queued messages (one with a file)
// and a file about to be sent, in headless Chromium: a desktop (1280×800) and a phone (390×844), each in the
// light and the dark theme, as web-desktop-light.png … web-phone-dark.png.
//
//   node client_js/browser/app_screenshot.mjs [out-dir]
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createServer } from "node:net";
import { device, launch, openApp, trpcClient, until } from "./app_helpers.mjs";
import { png } from "../src/testing/png.js";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const outDir = resolve(process.argv[2] ?? join(root, "docs"));
const shots = [
  { name: "desktop", viewport: { width: 1280, height: 800 } },
  { name: "phone", viewport: { width: 390, height: 844 } },
];
const chatsync = join(root, ".venv/bin/chatsync");

const port = await new Promise((ok) => {
  const s = createServer().listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => ok(p)); });
});
const tmp = mkdtempSync(join(tmpdir(), "chatsync-shot-"));
const env = { ...process.env, CHATSYNC_DATABASE_URL: `sqlite+aiosqlite:///${tmp}/db.sqlite`, CHATSYNC_PORT: String(port),
              CHATSYNC_ECHO_DELAY: "0.01", CHATSYNC_LOG_LEVEL: "warning" };
const token = execFileSync(chatsync, ["users", "create", "ada"], { env, encoding: "utf8" }).trim();
const server = spawn(chatsync, ["serve"], { env, stdio: "ignore" });
const url = `http://127.0.0.1:${port}`;
try {
  await until(() => fetch(url + "/healthz").then((r) => r.ok, () => false), Boolean, { what: "the server" });
  const api = trpcClient(url, token);
  const idle = (id) => until(() => api.query("session.get", { sessionId: id }),
                             (s) => s.session.status !== "running" && s.queue.length === 0, { what: "idle" });
  for (const title of ["Trip to Lisbon", "SQL index question", "Birthday ideas"]) {
    const s = await api.mutate("session.create", { title });
    await api.mutate("message.send", { sessionId: s.id, content: `Notes on ${title.toLowerCase()}` });
    await idle(s.id);
  }
  const s = await api.mutate("session.create", {
    title: "Release notes", tools: [{ name: "calculator", description: "Arithmetic", requiresApproval: true }],
  });
  // A bar chart as an attached image: weekly downloads, shown as a thumbnail in the history.
  const bars = [3, 5, 4, 7, 6, 9, 8, 11];
  const chart = png(240, 150, (x, y) => {
    const bar = Math.floor((x - 12) / 28);
    const inBar = x >= 12 && (x - 12) % 28 < 20 && bar < bars.length && 140 - y < (bars[bar] ?? 0) * 12;
    return inBar ? [29, 78, 216] : y === 140 ? [120, 120, 120] : [248, 249, 251];
  });
  const upload = (bytes, name) => {
    const form = new FormData();
    form.append("file", new Blob([bytes]), name);
    return fetch(url + "/files", { method: "POST", headers: { Authorization: `Bearer ${token}` }, body: form })
      .then((r) => r.json());
  };
  const uploaded = await upload(chart, "downloads.png");
  const migration = await upload("ALTER TABLE files ADD COLUMN sha256 text;\n", "migration.sql");
  await api.mutate("message.send", { sessionId: s.id, content:
    "Draft the highlights:\n\n## Highlights\n\n- The **queue** follows every device, in order\n" +
    "- `Send now` interrupts the answer and sends the item next\n- Approvals can be given from any device\n\n" +
    "1. Upgrade the server\n2. Run `bash scripts/setup.sh`\n3. Open the app on your phone" });
  await idle(s.id);
  await api.mutate("message.send", { sessionId: s.id, attachments: [{ fileId: uploaded.id }],
    content: "How many downloads in 19 weeks at 23 a week?\n/tool calculator {\"expression\": \"19*23\"}" });
  await until(() => api.query("session.get", { sessionId: s.id }), (g) => g.session.status === "requires-action",
              { what: "the approval" });
  for (const text of ["Then add a section on upgrading from 0.3, with the migration commands",
                      "And a short thank-you to everyone who tested the beta"]) {
    const attachments = text.includes("0.3") ? [{ fileId: migration.id }] : [];
    await api.mutate("message.enqueueMessage", { sessionId: s.id, content: text, attachments });
  }
  api.close();

  const browser = await launch();
  try {
    for (const { name, viewport } of shots) {
      for (const colorScheme of ["light", "dark"]) {
        const d = await device(browser, url, { token, viewport, colorScheme });
        await openApp(d.page, `/s/${s.id}`);
        await d.page.getByRole("list", { name: "Queued messages" }).waitFor();
        await d.page.getByRole("button", { name: "Approve" }).waitFor();
        await d.page.locator(".attachments img").first().waitFor();
        await d.page.locator(".composer input[type=file]").setInputFiles([
          { name: "changelog.md", mimeType: "text/markdown", buffer: Buffer.from("## 0.4\n\n- Attachments\n".repeat(40)) }]);
        await d.page.locator(".chip[data-state=ready]").waitFor();
        await d.page.getByRole("textbox", { name: "Message" }).fill("Also mention the new web app");
        const out = join(outDir, `web-${name}-${colorScheme}.png`);
        await d.page.screenshot({ path: out });
        if (d.problems.length) throw new Error(d.problems.join("\n"));
        await d.context.close();
        console.log(out);
      }
    }
  } finally {
    await browser.close();
  }
} finally {
  server.kill("SIGTERM");
  rmSync(tmp, { recursive: true, force: true });
}
