// The web app's session settings and device scenarios, run by app_driver.mjs for tests/web/test_web_settings.py.
// Controls are found by role and accessible name.
import { axeScan, devices, openApp, until } from "./app_helpers.mjs";

const log = (page) => page.getByRole("log", { name: "Conversation" });
const messageBox = (page) => page.getByRole("textbox", { name: "Message" });
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
