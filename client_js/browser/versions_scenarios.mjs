// Versions and branches in the web app, run by app_driver.mjs for tests/web/test_web_versions.py: two devices of
// one user on one chat. Controls are found by role and accessible name.
import { axeScan, devices, openApp, until } from "./app_helpers.mjs";

const log = (page) => page.getByRole("log", { name: "Conversation" });
const messageBox = (page) => page.getByRole("textbox", { name: "Message" });
const userTexts = async (page) => (await log(page).locator("[data-role=user] p.plain").allTextContents())
  .map((t) => t.trim());
const userMessage = (page, text) => log(page).locator("[data-role=user]").filter({ hasText: text });
const countOf = async (page, text) =>
  (await userMessage(page, text).locator(".version-count").textContent({ timeout: 1000 }).catch(() => null))?.trim();

export const versionsScenarios = {
  /** Device 1 edits the second question in place (Escape cancels, Enter sends): device 2 follows to the new
   * branch. Device 2 presses "Previous version": device 1 follows. Device 1 regenerates the last answer with the
   * model chosen; a message device 2 sends meanwhile goes out after it, on the new branch. Fork opens a new chat. */
  async versions({ browser, url, token, sessionId, second, edited, queued, checkpoint }) {
    return devices(browser, url, [{ token }, { token }], async ([d1, d2], problems) => {
      await openApp(d1.page, `/s/${sessionId}`);
      await openApp(d2.page, `/s/${sessionId}`);
      await userMessage(d2.page, second).waitFor();

      // Escape cancels an edit: nothing is sent.
      await userMessage(d1.page, second).getByRole("button", { name: "Edit" }).click();
      const box = d1.page.getByRole("textbox", { name: "Edit message" });
      await box.fill("never sent");
      await box.press("Escape");
      await box.waitFor({ state: "detached" });
      await checkpoint("cancelled", {});

      await userMessage(d1.page, second).getByRole("button", { name: "Edit" }).click();
      await box.fill(edited);
      await box.press("Enter");
      const followed = await until(() => userTexts(d2.page), (t) => t.includes(edited) && !t.includes(second),
                                   { what: "device 2 on the edited branch" });
      const editedCount = await until(() => countOf(d2.page, edited), (c) => c === "2 / 2", { what: "2 / 2 on device 2" });
      await checkpoint("edited", {});
      // A switch waits for the answer to end (the server refuses one while a run writes onto the path).
      await until(() => log(d2.page).locator("[data-role=assistant][data-status=streaming]").count(), (n) => n === 0,
                  { what: "the edited question's answer to end" });

      await userMessage(d2.page, edited).getByRole("button", { name: "Previous version" }).click();
      const back = await until(() => userTexts(d1.page), (t) => t.includes(second) && !t.includes(edited),
                               { what: "device 1 back on the first version" });
      const backCount = await until(() => countOf(d1.page, second), (c) => c === "1 / 2", { what: "1 / 2 on device 1" });
      await userMessage(d1.page, second).getByRole("button", { name: "Next version" }).click();
      await until(() => userTexts(d2.page), (t) => t.includes(edited), { what: "device 2 on the edited branch again" });
      await until(() => log(d1.page).locator("[data-role=assistant][data-status=complete]").count(), (n) => n >= 2,
                  { what: "the edited question's answer" });
      await checkpoint("switched", {});

      // Regenerate the last answer with the model chosen; device 2 sends while it runs.
      const last = log(d1.page).locator("[data-role=assistant]").last();
      const models = last.getByRole("combobox", { name: "Model for regenerate" });
      await models.focus();
      const options = await until(() => models.locator("option").allTextContents(), (o) => o.length >= 1,
                                  { what: "model choices" });
      await models.selectOption({ index: 0 });
      await last.getByRole("button", { name: "Regenerate" }).click();
      await log(d2.page).locator("[data-role=assistant][data-status=streaming]").waitFor();
      await messageBox(d2.page).fill(queued);
      await messageBox(d2.page).press("Enter");
      await until(() => userTexts(d1.page), (t) => t[t.length - 1] === queued, { what: "the queued message sent" });
      await until(() => log(d1.page).locator("[data-role=assistant][data-status=streaming]").count(), (n) => n === 0,
                  { what: "its answer" });
      const axe = await axeScan(d1.page);
      await checkpoint("regenerated", {});

      await log(d1.page).locator("[data-role=user]").first().getByRole("button", { name: "Fork" }).click();
      await until(() => d1.page.url(), (u) => !u.includes(sessionId), { what: "the fork opened" });
      const forkUrl = d1.page.url();
      return { problems: problems(), followed, editedCount, back, backCount, options, axe, forkUrl };
    });
  },
};
