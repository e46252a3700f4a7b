// The web app's tool cards for MCP tools (tests/web/test_web_mcp.py): server and tool named, progress while
// the call runs, the result as text (never HTML) and an image result shown as an image.
import { devices, openApp } from "./app_helpers.mjs";

const log = (page) => page.getByRole("log", { name: "Conversation" });
const messageBox = (page) => page.getByRole("textbox", { name: "Message" });

export const mcpScenarios = {
  async mcpCards({ browser, url, token, sessionId, server }) {
    return devices(browser, url, [{ token }], async ([d], problems) => {
      await openApp(d.page, `/s/${sessionId}`);
      await messageBox(d.page).fill(
        `/tool ${server}__progress {"steps": 3, "delay": 0.7}\n` +
        `/tool ${server}__text {"text": "<b id=\\"injected\\">bold</b>"}\n/tool ${server}__image {}`,
      );
      await messageBox(d.page).press("Enter");
      const card = (tool) => log(d.page).getByRole("region", { name: `Tool call: ${tool}` }).first();
      const bar = card("progress").getByRole("progressbar", { name: "Progress of progress" });
      await bar.waitFor();
      const progress = { value: await bar.getAttribute("value"), max: await bar.getAttribute("max") };
      await card("progress").locator(".tool-result").waitFor();
      await card("text").locator(".tool-result").waitFor();
      const image = card("image").getByRole("img", { name: "image-1.png returned by image" });
      await image.waitFor();
      await d.page.waitForFunction(
        (el) => el.complete && el.naturalWidth > 0, await image.elementHandle(),
      );
      return {
        servers: await Promise.all(["progress", "text", "image"].map((t) => card(t).locator(".tool-server").textContent())),
        progress,
        progressGone: await bar.count(),
        text: await card("text").locator(".tool-result").textContent(),
        injected: await d.page.locator("#injected").count(),
        imageWidth: await image.evaluate((el) => el.naturalWidth),
        problems: problems(),
      };
    });
  },
};
