// Runs the web app's browser scenarios (app_scenarios.mjs, link_scenarios.mjs, organise_scenarios.mjs, core_scenarios.mjs) for tests/web, one browser for all of them.
// Protocol: JSON lines. In: {"run": name, "params": {...}}. Out: {"checkpoint": label, "data": ...} — the
// test checks the server (its own client) and answers {"continue": value}; then {"done": result} or
// {"error": message}. Started as
//
//   CHATSYNC_URL=http://127.0.0.1:PORT node app_driver.mjs
import { createInterface } from "node:readline";
import { launch } from "./app_helpers.mjs";
import { scenarios as appScenarios } from "./app_scenarios.mjs";
import { linkScenarios } from "./link_scenarios.mjs";
import { presenceScenarios } from "./presence_scenarios.mjs";
import { organiseScenarios } from "./organise_scenarios.mjs";
import { coreScenarios } from "./core_scenarios.mjs";
import { settingsScenarios } from "./settings_scenarios.mjs";
import { mcpScenarios } from "./mcp_scenarios.mjs";
import { versionsScenarios } from "./versions_scenarios.mjs";

const scenarios = { ...appScenarios, ...linkScenarios, ...presenceScenarios, ...organiseScenarios, ...coreScenarios,
                    ...settingsScenarios, ...mcpScenarios, ...versionsScenarios };

const url = process.env.CHATSYNC_URL;
const browser = await launch();
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const send = (msg) => process.stdout.write(JSON.stringify(msg) + "\n");

async function next() {
  const { value, done } = await lines.next();
  if (done) throw new Error("the test closed the driver's input");
  return JSON.parse(value);
}

/** Hands the test what the browsers show at this step and waits for its answer. */
async function checkpoint(label, data) {
  send({ checkpoint: label, data });
  const reply = await next();
  if ("abort" in reply) throw new Error(`the test stopped at ${label}: ${reply.abort}`);
  return reply.continue;
}

try {
  for (;;) {
    const { value, done } = await lines.next();
    if (done) break;
    const { run, params } = JSON.parse(value);
    try {
      if (!scenarios[run]) throw new Error(`no scenario ${run}`);
      const result = await scenarios[run]({ browser, url, checkpoint, ...params });
      send({ done: result ?? null });
    } catch (err) {
      send({ error: String(err?.stack ?? err) });
    }
  }
} finally {
  await browser.close();
}
