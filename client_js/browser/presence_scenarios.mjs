// Devices that know about each other, in the web app (tests/web/test_web_presence.py): one user's laptop and phone
// as two browser contexts. Controls and regions are found by role, accessible name and text, as a person (or a
// screen reader) finds them.
import { deliverPush, devices, notifications, openApp, until } from "./app_helpers.mjs";

const message = (page) => page.getByRole("textbox", { name: "Message" });

export const presenceScenarios = {
  /** The phone sees the laptop open the chat and type; the laptop's draft is offered on the phone, taken and
   * sent there, and cleared on the laptop; the laptop closes and drops out; an answer nobody looks at marks the
   * chat unread in the phone's list until the phone opens it. */
  async presence_and_drafts({ browser, url, laptop, phone, sessionId, otherId, laptopName, checkpoint }) {
    return devices(browser, url, [{ token: laptop }, { token: phone }], async ([d1, d2], problems) => {
      await openApp(d2.page, `/s/${sessionId}`);
      await openApp(d1.page, `/s/${sessionId}`);
      const seen = {};
      const status = d2.page.getByRole("status").filter({ hasText: "Also open on" });
      await status.waitFor();
      seen.alsoOpen = (await status.textContent()).trim();

      await message(d1.page).pressSequentially("hello from the laptop", { delay: 20 });
      await d2.page.getByText(`${laptopName} is typing…`).waitFor();
      const offer = d2.page.getByRole("group", { name: "Draft from another device" });
      await offer.getByText(`Draft from ${laptopName}`).waitFor();
      seen.offered = (await offer.textContent()).replace(/\s+/g, " ");
      await offer.getByRole("button", { name: "Use draft" }).click();
      // The box is filled once the app has applied the draft; the test then checks its text.
      seen.taken = await until(() => message(d2.page).inputValue(), (v) => v !== "", { what: "the draft taken" });
      await message(d2.page).press("Enter");
      seen.laptopComposer = await until(() => message(d1.page).inputValue(), (v) => v === "", {
        what: "the laptop's composer emptied",
      });
      await checkpoint("sent", seen);

      await d1.page.close();
      await until(() => d2.page.getByText("Also open on").count(), (n) => n === 0, { what: "the laptop gone" });
      seen.gone = true;

      await d2.page.goto(`/s/${otherId}`);
      await checkpoint("elsewhere", null); // the test has the first chat answered while no device looks at it
      const nav = d2.page.getByRole("navigation", { name: "Sessions" });
      // Only this test's chat: other tests on the same server may leave chats of this user unread.
      const unread = nav.getByRole("link", { name: /^Plans.*unread/ });
      await unread.waitFor();
      seen.unreadName = (await unread.textContent()).replace(/\s+/g, " ");
      await unread.click();
      await until(() => nav.getByRole("link", { name: /^Plans.*unread/ }).count(), (n) => n === 0, { what: "read" });
      seen.problems = problems();
      return seen;
    });
  },

  /** A push delivered to the service worker (DevTools: ServiceWorker.deliverPushMessage) shows a notification
   * with the payload's title, body and Approve/Deny actions. */
  async push_shows_a_notification({ browser, url, token, payload }) {
    return devices(browser, url, [{ token }], async ([d], problems) => {
      await openApp(d.page, "/");
      await deliverPush(d, url, [payload]);
      const shown = (await notifications(d.page)).map(({ sessionId, ...n }) => n);
      const cached = await d.page.evaluate(async () => {
        const names = await caches.keys();
        const keys = [];
        for (const name of names) for (const r of await (await caches.open(name)).keys()) keys.push(new URL(r.url).pathname);
        return keys;
      });
      return { shown, cached, problems: problems() };
    });
  },
};
