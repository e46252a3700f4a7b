// MCP tools in the web app (tests/web/test_web_mcp.py): enabled in "Session settings" with their policy, then
// their tool cards: server and tool named, progress while the call runs, the result as text (never HTML) and an
// image result shown as an image.
import { devices, openApp } from "./app_helpers.mjs";

const log = (page) => page.getByRole("log", { name: "Conversation" });
const messageBox = (page) => page.getByRole("textbox", { name: "Message" });

export const mcpScenarios = {
  async mcpCards({ browser, url, token, sessionId, server, checkpoint }) {
    return devices(browser, url, [{ token }], async ([d], problems) => {
      await openApp(d.page, `/s/${sessionId}`);
      await d.page.getByRole("button", { name: "Session settings" }).click();
      const dialog = d.page.getByRole("dialog", { name: "Session settings" });
      const row = dialog.getByRole("group", { name: `MCP server ${server}` });
      await row.getByRole("list", { name: `Tools of ${server}` }).getByText("progress", { exact: true }).waitFor();
      const listedTools = await row.getByRole("list", { name: `Tools of ${server}` }).locator("code").allTextContents();
      const policyBefore = await row.getByRole("combobox", { name: `Approval for ${server}` }).inputValue();
      await row.getByRole("checkbox", { name: `Use ${server}` }).check();
      await row.getByRole("combobox", { name: `Approval for ${server}` }).selectOption("auto");
      await dialog.getByRole("button", { name: "Save" }).click();
      await dialog.waitFor({ state: "hidden" });
      await checkpoint("saved", { listedTools, policyBefore });
      await messageBox(d.page).fill(
        `/tool ${server}__progress {"steps": 3, "delay": 0.7}\n` +
        `/tool ${server}__text {"text": "<b id=\\"injected\\">bold</b>"}\n/tool ${server}__image {}`,
      );
      await messageBox(d.page).press("Enter");
      const card = (tool) => log(d.page).getByRole("group", { name: `Tool call: ${tool}` }).first();
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
