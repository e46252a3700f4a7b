// Lighthouse's accessibility and best-practices audits of the web app, on Debian's Chromium (never a downloaded
// browser), for bench/lighthouse.py. The app is signed in through localStorage before each audit, and Lighthouse
// keeps that storage. One JSON line per audited page on stdout:
//   {"page", "formFactor", "scores": {"accessibility", "best-practices"}, "failed": [{"id", "title"}...],
//    "shown": {"title", "conversation", "signIn"}, "audits"}
//
//   CHATSYNC_URL=... CHATSYNC_TOKEN=... AUDIT_PAGES='[{"name":"chat","path":"/s/<id>"}]' node audit.mjs
import lighthouse from "lighthouse";
import desktopConfig from "lighthouse/core/config/desktop-config.js";
import puppeteer from "puppeteer-core";

const url = process.env.CHATSYNC_URL;
const token = process.env.CHATSYNC_TOKEN;
const pages = JSON.parse(process.env.AUDIT_PAGES);
const categories = ["accessibility", "best-practices"];

const browser = await puppeteer.launch({
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox"],
});
try {
  for (const formFactor of ["desktop", "mobile"]) {
    for (const target of pages) {
      const page = await browser.newPage();
      await page.goto(url + "/healthz");
      if (target.signedIn !== false) {
        await page.evaluate((t) => localStorage.setItem("chatsync.token", t), token);
      } else {
        await page.evaluate(() => localStorage.removeItem("chatsync.token"));
      }
      const flags = { output: "json", logLevel: "error", onlyCategories: categories, disableStorageReset: true };
      const config = formFactor === "desktop" ? desktopConfig : undefined;
      const result = await lighthouse(url + target.path, flags, config, page);
      const lhr = result.lhr;
      const scores = Object.fromEntries(categories.map((c) => [c, Math.round(lhr.categories[c].score * 100)]));
      const failed = categories.flatMap((c) => lhr.categories[c].auditRefs)
        .map((ref) => lhr.audits[ref.id])
        .filter((a) => a.score !== null && a.score < 1 && a.scoreDisplayMode !== "informative")
        .map((a) => ({ id: a.id, title: a.title }));
      // What was audited: the tab's title and whether the conversation or the sign-in form was on screen.
      const shown = await page.evaluate(() => ({
        title: document.title,
        conversation: !!document.querySelector("[role=log]"),
        signIn: !!document.querySelector("input[type=password], input[autocomplete=off]"),
      }));
      const audits = categories.reduce((n, c) => n + lhr.categories[c].auditRefs.length, 0);
      console.log(JSON.stringify({ page: target.name, formFactor, scores, failed, shown, audits }));
      await page.close();
    }
  }
} finally {
  await browser.close();
}
