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

// Finished answers are rendered in one piece, once: a chat opened again (or re-rendered) reuses the HTML.
const finished = new Map<string, string>();
const FINISHED_KEPT = 2000;

/** Sanitised HTML of a whole finished text, cached by the text. */
export function renderFinished(text: string): string {
  let html = finished.get(text);
  if (html === undefined) {
    html = sanitize(md.parse(text) as string);
    if (finished.size >= FINISHED_KEPT) finished.delete(finished.keys().next().value!);
    finished.set(text, html);
  }
  return html;
}

export interface Blocks {
  /** Settled blocks' HTML, in order; never changed once pushed. */
  settled: string[];
  /** UTF-16 index in the text up to which it was cut into settled blocks. */
  consumed: number;
  /** The text that was cut, to notice when the text was replaced rather than extended. */
  source: string;
}

export const emptyBlocks = (): Blocks => ({ settled: [], consumed: 0, source: "" });

/**
 * Cuts `text` into settled blocks plus the HTML of the unsettled tail. `prev` is reused when `text` extends
 * the text it was made from; when `final`, every block is settled (the answer is complete).
 */
export function splitBlocks(prev: Blocks, text: string, final: boolean): { blocks: Blocks; tail: string } {
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
    if (tok.type !== "space") settled.push(renderTokens([tok], links));
  }
  const tail = keep < tokens.length ? renderTokens(tokens.slice(keep), links) : "";
  return { blocks: { settled, consumed, source: text }, tail };
}
