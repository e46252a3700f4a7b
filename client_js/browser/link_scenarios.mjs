// The web app's device sign-in link scenarios, run by app_driver.mjs for tests/web/test_web_links.py. A link
// signs another device in; it names the account it is for and asks before it is spent, so a page that sends a
// signed-in person to someone else's link cannot switch their account behind their back; the links waiting to
// be used are listed on Devices and can be revoked. Controls are found by role and accessible name.
import { axeScan, connection, devices, openApp, until } from "./app_helpers.mjs";

const storedToken = (page) => page.evaluate(() => localStorage.getItem("chatsync.token"));
const pathOf = (link) => new URL(link).pathname + new URL(link).hash;
const codeOf = (link) => new URL(link).hash.slice(1);
const connected = (page) => connection(page).getByText(/^(connected|resumed)$/).waitFor();

/** What the link prompt shows: its heading, its text, and the button that has the focus. */
async function prompt(page) {
  const main = page.getByRole("main");
  return {
    heading: await main.getByRole("heading", { level: 1 }).textContent(),
    text: (await main.textContent()).replace(/\s+/g, " "),
    focused: await page.evaluate(() => document.activeElement?.textContent ?? null),
    address: page.url(),
  };
}

/** Records every URL a page requests, to show a link's code never travels in one. */
function recordRequests(page) {
  const urls = [];
  page.on("request", (r) => urls.push(r.url()));
  return (link) => urls.some((u) => u.includes(codeOf(link)));
}

export const linkScenarios = {
  /** Device sign-in: a link made on device 1 signs in device 2 (code in the fragment) once device 2 agrees to
   * the account it names; revoking device 2 signs it out. */
  async device_link({ browser, url, token, account }) {
    return devices(browser, url, [{ token }, {}], async ([d1, d2], problems) => {
      await openApp(d1.page, "/devices");
      await d1.page.getByRole("button", { name: "Link a device" }).click();
      const link = await d1.page.getByRole("textbox", { name: "Sign-in link" }).inputValue();
      const waiting = d1.page.getByRole("list", { name: "Pending sign-in links" }).getByRole("listitem");
      const pendingShown = await until(() => waiting.count(), (n) => n > 0, { what: "the pending link" });
      const codeSent = recordRequests(d2.page);
      await d2.page.goto(pathOf(link));
      await d2.page.getByRole("button", { name: `Sign in as ${account}` }).click();
      await connection(d2.page).getByText("connected").waitFor();
      await d2.page.getByRole("navigation", { name: "Sessions" }).waitFor();
      const addressAfter = d2.page.url();
      const d2Token = await storedToken(d2.page);
      await d1.page.reload();
      const list = d1.page.getByRole("list", { name: "Signed-in devices" });
      await until(() => list.getByRole("listitem").count(), (n) => n >= 2, { what: "two devices" });
      const names = await list.getByRole("listitem").locator(".device-name").allTextContents();
      const pendingAfter = await d1.page.getByRole("list", { name: "Pending sign-in links" }).count();
      const other = list.getByRole("listitem").filter({ hasNotText: "(this device)" }).last();
      await other.getByRole("button", { name: "Revoke" }).click();
      await other.getByRole("button", { name: "Yes, revoke" }).click(); // it asks first
      await d2.page.getByRole("textbox", { name: "Access token" }).waitFor();
      const d2Alert = await d2.page.getByRole("alert").textContent();
      return { link, addressAfter, d2TokenSet: !!d2Token && d2Token !== token, names, d2Alert, pendingShown,
               pendingAfter, codeSentInUrl: codeSent(link), problems: problems() };
    });
  },

  /** A person signed in as `victim` is sent to a link of `account`'s (login CSRF): the app names the account
   * and asks; staying keeps the sign-in (what they type next is theirs); opened again and accepted, it switches. */
  async link_to_another_account({ browser, url, token, victim, account, link, checkpoint }) {
    return devices(browser, url, [{ token }], async ([d], problems) => {
      const { page } = d;
      const codeSent = recordRequests(page);
      await openApp(page, "/");
      await page.goto(pathOf(link)); // what the other page does: a plain navigation to the link
      const stay = page.getByRole("button", { name: `Stay signed in as ${victim}` });
      await page.getByRole("button", { name: `Sign in as ${account}` }).waitFor();
      await stay.waitFor();
      const asked = await prompt(page);
      const axe = await axeScan(page);
      await checkpoint("asked", asked);

      await stay.click();
      await connected(page);
      const nav = page.getByRole("navigation", { name: "Sessions" });
      // "/" opens her newest chat once the list is in (or shows "No chats yet."): let it, so that the next URL is
      // the one "New chat" opens and the message goes where this scenario looks for it.
      const settled = page.getByText("No chats yet.");
      await until(async () => new URL(page.url()).pathname.startsWith("/s/") || await settled.isVisible(),
                  (ok) => ok, { what: "the first chat opened or the empty list shown" });
      const before = page.url();
      await nav.getByRole("button", { name: "New chat" }).click();
      await page.waitForURL((u) => u.pathname.startsWith("/s/") && u.href !== before);
      const box = page.getByRole("textbox", { name: "Message" });
      await box.fill("typed after staying signed in");
      await box.press("Enter");
      await page.getByRole("log", { name: "Conversation" }).getByText("typed after staying signed in").waitFor();
      const sessionId = decodeURIComponent(new URL(page.url()).pathname.split("/")[2]);
      const kept = (await storedToken(page)) === token;
      await checkpoint("stayed", { kept, sessionId });

      await page.goto(pathOf(link));
      await page.getByRole("button", { name: `Sign in as ${account}` }).click();
      const switched = await until(() => storedToken(page), (t) => !!t && t !== token, { what: "a new token" });
      await connected(page);
      await page.getByRole("navigation", { name: "Sessions" }).waitFor();

      await page.goto(pathOf(link)); // spent now: says so, and the sign-in stays
      const spent = await page.getByRole("alert").textContent();
      await page.getByRole("button", { name: `Continue as ${account}` }).click();
      await connected(page);
      const stillSwitched = (await storedToken(page)) === switched;
      return { asked, axe, kept, sessionId, switched, spent, stillSwitched, codeSentInUrl: codeSent(link),
               problems: problems() };
    });
  },

  /** Signed out: a link says whose account it is for before it is spent; "Cancel" leaves it unspent. */
  async link_signed_out({ browser, url, account, link, checkpoint }) {
    return devices(browser, url, [{}], async ([d], problems) => {
      const { page } = d;
      await page.goto(pathOf(link));
      await page.getByRole("button", { name: `Sign in as ${account}` }).waitFor();
      const asked = await prompt(page);
      await checkpoint("named", asked);
      await page.getByRole("button", { name: "Cancel" }).click();
      await page.getByRole("textbox", { name: "Access token" }).waitFor();
      const tokenAfterCancel = await storedToken(page);
      await checkpoint("cancelled", { tokenAfterCancel });
      await page.goto(pathOf(link));
      await page.getByRole("button", { name: `Sign in as ${account}` }).click();
      await connected(page);
      return { asked, tokenAfterCancel, token: await storedToken(page), problems: problems() };
    });
  },

  /** Devices lists the links waiting to be used, whichever device made them; "Revoke link" revokes one. */
  async pending_links({ browser, url, token, checkpoint }) {
    return devices(browser, url, [{ token }], async ([d], problems) => {
      const { page } = d;
      await checkpoint("before", {}); // the test makes a link of its own
      await openApp(page, "/devices");
      await page.getByRole("button", { name: "Link a device" }).click();
      const made = await page.getByRole("textbox", { name: "Sign-in link" }).inputValue();
      const list = page.getByRole("list", { name: "Pending sign-in links" });
      await until(() => list.getByRole("listitem").count(), (n) => n === 2, { what: "two pending links" });
      const items = await list.getByRole("listitem").allTextContents();
      const axe = await axeScan(page);
      await list.getByRole("listitem").first().getByRole("button", { name: "Revoke link" }).click();
      await until(() => list.getByRole("listitem").count(), (n) => n === 1, { what: "one pending link" });
      const left = await list.getByRole("listitem").allTextContents();
      await checkpoint("revoked", { made });
      return { made, items, left, axe, problems: problems() };
    });
  },
};
