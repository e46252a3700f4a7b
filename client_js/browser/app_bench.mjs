// The web app's numbers in headless Chromium, for bench/web.py (which starts the server and fills a session
// with 1,000 messages). One JSON line per run on stdout:
//   {"kind": "open", "interactiveMs", "completeMs", "longTasks": [ms...]}  — opening that session: until its
//     newest message shows and the main thread is free for the next task (interactive), and until every
//     message `session.get` returned (its newest 200) is in the log (complete; older ones are added in slices
//     after the newest; the rest of the history is read with "Load earlier messages");
//   {"kind": "stream", "tokens", "seconds", "longTasks": [ms...]}  — one answer streamed into it.
// Long tasks are the browser's own (PerformanceObserver "longtask": every main-thread task over 50 ms).
//
//   CHATSYNC_URL=... CHATSYNC_TOKEN=... BENCH_SESSION=<id> BENCH_OPEN_RUNS=5 BENCH_STREAM_RUNS=3 \
//   BENCH_STREAM_WORDS=2000 node app_bench.mjs
import { device, launch } from "./app_helpers.mjs";

const url = process.env.CHATSYNC_URL;
const token = process.env.CHATSYNC_TOKEN;
const sessionId = process.env.BENCH_SESSION;
const expected = Number(process.env.BENCH_MESSAGES ?? 1000);
const openRuns = Number(process.env.BENCH_OPEN_RUNS ?? 5);
const streamRuns = Number(process.env.BENCH_STREAM_RUNS ?? 3);
const streamWords = Number(process.env.BENCH_STREAM_WORDS ?? 2000);

const FIRST_PAGE = 200; // session.get's messageLimit
const all = (page) => page.waitForFunction((n) => document.querySelectorAll("[role=log] [data-role]").length >= n,
                                          Math.min(expected, FIRST_PAGE), { polling: "raf", timeout: 60_000 });

async function open(page) {
  // The newest message: the answer to the last question (the session was filled in order).
  const newest = `Question ${expected / 2 - 1}:`;
  await page.waitForFunction((t) => {
    const answers = document.querySelectorAll("[role=log] [data-role=assistant]");
    return answers.length > 0 && answers[answers.length - 1].textContent.includes(t);
  }, newest, { polling: "raf", timeout: 60_000 });
  const interactiveMs = await page.evaluate(() => new Promise((resolve) =>
    requestAnimationFrame(() => setTimeout(() => resolve(performance.now()), 0))));
  await all(page);
  const completeMs = await page.evaluate(() => performance.now());
  const longTasks = await page.evaluate(() => window.__longTasks);
  return { kind: "open", interactiveMs, completeMs, longTasks };
}

async function stream(page) {
  // Earlier streaming runs added to the session: wait for all of it, then one more answer, into that log.
  await all(page);
  // Paragraphs of 40 words, and every 200 words a fenced code block of 8 lines (highlighted once settled).
  const code = (i) => "\n\n```python\n" + Array.from({ length: 8 }, (_, k) => `value_${i}_${k} = compute(${k}, "w${i}")`)
    .join("\n") + "\n```\n\n";
  const words = Array.from({ length: streamWords }, (_, i) =>
    i % 200 === 199 ? `w${i}${code(i)}` : i % 40 === 39 ? `w${i}\n\n` : `w${i}`).join(" ");
  const box = page.getByRole("textbox", { name: "Message" });
  await box.fill(words);
  await page.evaluate(() => { window.__longTasks = []; window.__longTaskStarts = []; });
  await box.press("Enter");
  await page.waitForFunction(() => document.querySelector("[role=log]").getAttribute("aria-busy") === "true",
                             null, { timeout: 30_000 });
  const t0 = await page.evaluate(() => performance.now());
  await page.waitForFunction(() => document.querySelector("[role=log]").getAttribute("aria-busy") === "false",
                             null, { timeout: 120_000 });
  const t1 = await page.evaluate(() => performance.now());
  const longTasks = await page.evaluate(() => window.__longTasks);
  // When each happened, in ms after the answer started (to tell the start, the middle and the end apart).
  const longTaskAt = await page.evaluate((t) => window.__longTaskStarts.map((s) => Math.round(s - t)), t0);
  return { kind: "stream", tokens: streamWords, seconds: (t1 - t0) / 1000, longTasks, longTaskAt };
}

const browser = await launch();
try {
  for (let run = 0; run < openRuns + streamRuns; run++) {
    const d = await device(browser, url, { token });
    try {
      await d.page.addInitScript(() => {
        window.__longTasks = [];
        window.__longTaskStarts = [];
        new PerformanceObserver((list) => {
          for (const e of list.getEntries()) { window.__longTasks.push(e.duration); window.__longTaskStarts.push(e.startTime); }
        })
          .observe({ type: "longtask", buffered: true });
      });
      await d.page.goto(`/s/${sessionId}`);
      console.log(JSON.stringify(run < openRuns ? await open(d.page) : await stream(d.page)));
      if (d.problems.length) throw new Error(d.problems.join("\n"));
    } finally {
      await d.context.close();
    }
  }
} finally {
  await browser.close();
}
