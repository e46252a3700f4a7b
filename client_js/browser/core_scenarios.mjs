// The conversation keeping the reader's place and saying what went wrong: tool calls that end each their own way,
// the log following the newest message, failures with their reason and Retry, messages written while the server
// is away. Run by app_driver.mjs for tests/web; every control is found by its role and accessible name.
import { axeScan, devices, openApp } from "./app_helpers.mjs";

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

export const coreScenarios = {
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
