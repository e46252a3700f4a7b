// Code blocks' highlighting, off the first paint and off the streaming path: lib/highlight.ts (highlight.js) is
// imported the first time a settled block names a language, and blocks are highlighted a few at a time between
// frames, so a history full of code never holds the page for long. Results are kept by language and text, so a
// block shown again (a chat reopened, a page of history redrawn) is not highlighted again.

/** Longer code is shown plain: highlighting it would cost more than a frame. */
export const MAX_HIGHLIGHT_CHARS = 20_000;
const KEPT = 500;
const BUDGET_MS = 8;

type Highlighter = typeof import("./highlight");
let loading: Promise<Highlighter> | null = null;
const done = new Map<string, string | null>();
const jobs: { key: string; lang: string; code: string; resolve: (html: string | null) => void }[] = [];
let scheduled = false;

const keyOf = (lang: string, code: string) => `${lang.toLowerCase()}\u0000${code}`;

/** Whether highlighting is worth asking for: a language is named and the code is not too long. */
export function highlightable(lang: string, code: string): boolean {
  return lang !== "" && code.length <= MAX_HIGHLIGHT_CHARS;
}

/** The highlighted HTML already made for this code (undefined: not yet; null: the language is not known). */
export function highlighted(lang: string, code: string): string | null | undefined {
  return done.get(keyOf(lang, code));
}

function later(f: () => void): void {
  if (typeof requestIdleCallback === "function") requestIdleCallback(f, { timeout: 200 });
  else setTimeout(f, 16);
}

function schedule(mod: Highlighter): void {
  if (scheduled) return;
  scheduled = true;
  later(() => {
    scheduled = false;
    const start = performance.now();
    while (jobs.length && performance.now() - start < BUDGET_MS) {
      const job = jobs.shift()!;
      let html = done.get(job.key);
      if (html === undefined) {
        html = mod.highlightCode(job.lang, job.code);
        if (done.size >= KEPT) done.delete(done.keys().next().value!);
        done.set(job.key, html);
      }
      job.resolve(html);
    }
    if (jobs.length) schedule(mod);
  });
}

/** The code as highlighted HTML (null: not highlighted), made between frames after loading the highlighter. */
export function highlight(lang: string, code: string): Promise<string | null> {
  const known = highlighted(lang, code);
  if (known !== undefined) return Promise.resolve(known);
  if (!highlightable(lang, code)) return Promise.resolve(null);
  loading ??= import("./highlight");
  return loading.then((mod) => new Promise((resolve) => {
    jobs.push({ key: keyOf(lang, code), lang, code, resolve });
    schedule(mod);
  }), () => {
    loading = null; // a failed load (the server restarted mid-way) is tried again by the next block
    return null;
  });
}
