// Takes docs/web.png: a real server (temporary SQLite, the echo model), a few chats, one with a rendered
// answer, a tool call waiting for approval and two queued messages, in headless Chromium at 1280×800.
//
//   node client_js/browser/app_screenshot.mjs [out.png]
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createServer } from "node:net";
import { device, launch, openApp, trpcClient, until } from "./app_helpers.mjs";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const out = resolve(process.argv[2] ?? join(root, "docs/web.png"));
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
  await api.mutate("message.send", { sessionId: s.id, content:
    "Draft the highlights:\n\n## Highlights\n\n- The **queue** follows every device, in order\n" +
    "- `Send now` interrupts the answer and sends the item next\n- Approvals can be given from any device\n\n" +
    "1. Upgrade the server\n2. Run `bash scripts/setup.sh`\n3. Open the app on your phone" });
  await idle(s.id);
  await api.mutate("message.send", { sessionId: s.id,
    content: "How many downloads in 19 weeks at 23 a week?\n/tool calculator {\"expression\": \"19*23\"}" });
  await until(() => api.query("session.get", { sessionId: s.id }), (g) => g.session.status === "requires-action",
              { what: "the approval" });
  for (const text of ["Then add a section on upgrading from 0.3, with the migration commands",
                      "And a short thank-you to everyone who tested the beta"]) {
    await api.mutate("message.enqueueMessage", { sessionId: s.id, content: text });
  }
  api.close();

  const browser = await launch();
  try {
    const d = await device(browser, url, { token, viewport: { width: 1280, height: 800 }, colorScheme: "light" });
    await openApp(d.page, `/s/${s.id}`);
    await d.page.getByRole("list", { name: "Queued messages" }).waitFor();
    await d.page.getByRole("button", { name: "Approve" }).waitFor();
    await d.page.getByRole("textbox", { name: "Message" }).fill("Also mention the new web app");
    await d.page.screenshot({ path: out });
    if (d.problems.length) throw new Error(d.problems.join("\n"));
    console.log(out);
  } finally {
    await browser.close();
  }
} finally {
  server.kill("SIGTERM");
  rmSync(tmp, { recursive: true, force: true });
}
