// Markdown for the model's answers: marked turns text into HTML, DOMPurify cleans it.
//
// Raw HTML in a message is shown as text, never interpreted: an answer that echoes `<img onerror=…>` shows
// those characters. DOMPurify is the second line: only safe tags and URLs (no `javascript:`), no inline
// styles (the page's CSP would refuse them anyway, with a console error), no images (they would load from
// other origins, which the CSP refuses too: they become links).
//
// A streaming answer is cut into blocks (paragraphs, lists, code fences): every block but the last is
// settled — later text cannot change it — and rendered once; only the last block is rendered again as
// tokens arrive. `splitBlocks` does the cutting, incrementally from where it stopped.
//
// Code blocks at the top level of an answer are not HTML here but `code` segments (language and text), shown
// by the CodeBlock component: a copy button, the language, and highlighting once the block is settled.
import { Marked, type Token, type Tokens } from "marked";
import DOMPurify from "dompurify";

const escapeHtml = (s: string) =>
  s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

const md = new Marked({
  gfm: true,
  breaks: true,
  renderer: {
    html({ text }: Tokens.HTML | Tokens.Tag) {
      return escapeHtml(text);
    },
    image({ href, text }: Tokens.Image) {
      return `<a href="${escapeHtml(href ?? "")}">${escapeHtml(text || href || "image")}</a>`;
    },
  },
});

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.getAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
});

const PURIFY = {
  FORBID_TAGS: ["style", "img", "form", "input", "button", "textarea", "select", "iframe", "svg", "math", "video",
                "audio", "source", "picture", "object", "embed"],
  FORBID_ATTR: ["style", "class", "id"],
};

export function sanitize(html: string): string {
  return DOMPurify.sanitize(html, PURIFY) as unknown as string;
}

/** Sanitised HTML of markdown blocks (tokens from one lexer run, which holds the link definitions). */
function renderTokens(tokens: Token[], links: Record<string, unknown>): string {
  const list = Object.assign(tokens.slice(), { links });
  return sanitize(md.parser(list as any));
}

/** A piece of a rendered answer: sanitised HTML, or a code block's language (first word of its info string,
 * possibly empty) and text. A segment, once settled, is never changed: components may keep it by identity. */
export type Segment = { kind: "html"; html: string } | { kind: "code"; lang: string; code: string };

function codeSegment(tok: Tokens.Code): Segment {
  return { kind: "code", lang: (tok.lang ?? "").trim().split(/\s+/)[0] ?? "", code: tok.text };
}

/** Segments of consecutive tokens: runs of non-code tokens become one HTML segment each. */
function segmentsOf(tokens: Token[], links: Record<string, unknown>): Segment[] {
  const out: Segment[] = [];
  let run: Token[] = [];
  const flush = () => {
    if (run.some((t) => t.type !== "space")) out.push({ kind: "html", html: renderTokens(run, links) });
    run = [];
  };
  for (const tok of tokens) {
    if (tok.type === "code") {
      flush();
      out.push(codeSegment(tok as Tokens.Code));
    } else {
      run.push(tok);
    }
  }
  flush();
  return out;
}

// Finished answers are rendered in one piece, once: a chat opened again (or re-rendered) reuses the segments.
const finished = new Map<string, Segment[]>();
const FINISHED_KEPT = 2000;

/** The segments of a whole finished text, cached by the text. */
export function renderFinished(text: string): Segment[] {
  let segments = finished.get(text);
  if (segments === undefined) {
    const tokens = md.lexer(text);
    segments = segmentsOf(tokens, (tokens as any).links ?? {});
    if (finished.size >= FINISHED_KEPT) finished.delete(finished.keys().next().value!);
    finished.set(text, segments);
  }
  return segments;
}

export interface Blocks {
  /** Settled blocks, in order; never changed once pushed. */
  settled: Segment[];
  /** UTF-16 index in the text up to which it was cut into settled blocks. */
  consumed: number;
  /** The text that was cut, to notice when the text was replaced rather than extended. */
  source: string;
}

export const emptyBlocks = (): Blocks => ({ settled: [], consumed: 0, source: "" });

/**
 * Cuts `text` into settled blocks plus the unsettled tail (the last block, still growing; null when there is
 * none). `prev` is reused when `text` extends the text it was made from; when `final`, every block is settled
 * (the answer is complete).
 */
export function splitBlocks(prev: Blocks, text: string, final: boolean): { blocks: Blocks; tail: Segment | null } {
  let blocks = prev;
  if (!text.startsWith(prev.source.slice(0, prev.consumed))) blocks = emptyBlocks();
  const rest = text.slice(blocks.consumed);
  const tokens = md.lexer(rest);
  const links = (tokens as any).links ?? {};
  const keep = final ? tokens.length : Math.max(0, tokens.length - 1);
  const settled = blocks.settled.slice();
  let consumed = blocks.consumed;
  for (let i = 0; i < keep; i++) {
    const tok = tokens[i];
    consumed += tok.raw.length;
    if (tok.type === "code") settled.push(codeSegment(tok as Tokens.Code));
    else if (tok.type !== "space") settled.push({ kind: "html", html: renderTokens([tok], links) });
  }
  const open = tokens.slice(keep);
  let tail: Segment | null = null;
  if (open.length === 1 && open[0].type === "code") tail = codeSegment(open[0] as Tokens.Code);
  else if (open.length) tail = { kind: "html", html: renderTokens(open, links) };
  return { blocks: { settled, consumed, source: text }, tail };
}
