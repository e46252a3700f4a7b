import { memo } from "preact/compat";
import { useEffect, useState } from "preact/hooks";
import { highlight, highlightable, highlighted } from "../lib/code";
import { announce } from "../stores/announcer";
import { errorMessage } from "../lib/chatsync";
import "../code.css";

/**
 * A code block of an answer: its language, a "Copy" button, and the code in a box that scrolls sideways
 * (long lines are not wrapped: code keeps its shape). Highlighted once settled (`open`: still streaming, shown
 * plain), never again while the rest of the answer streams: settled blocks keep their props, so memo skips them.
 */
export const CodeBlock = memo(function CodeBlock({ lang, code, open = false }:
                                                 { lang: string; code: string; open?: boolean }) {
  // What was highlighted, with the code it was made from: a block given other code shows it plain until its own
  // highlighting is ready, never another text's.
  const [made, setMade] = useState<{ lang: string; code: string; html: string | null } | null>(null);
  const html = made && made.lang === lang && made.code === code ? made.html : highlighted(lang, code);
  const [copied, setCopied] = useState(false);
  useEffect(() => {
    if (open || !highlightable(lang, code) || html !== undefined) return;
    let gone = false;
    void highlight(lang, code).then((h) => { if (!gone) setMade({ lang, code, html: h }); });
    return () => { gone = true; };
  }, [open, lang, code]);
  useEffect(() => {
    if (!copied) return;
    const t = setTimeout(() => setCopied(false), 2000);
    return () => clearTimeout(t);
  }, [copied]);
  const copy = () => navigator.clipboard.writeText(code).then(() => {
    setCopied(true);
    announce("Code copied");
  }, (err) => announce(`Copying failed: ${errorMessage(err)}`));
  const label = lang || "text";
  return (
    <div class="code-block" role="group" aria-label={`Code: ${label}`}>
      <div class="code-head">
        <span class="code-lang" aria-hidden="true">{label}</span>
        <button type="button" class="code-copy" data-copied={copied ? "" : undefined} onClick={copy}>Copy</button>
      </div>
      {/* Focusable so a keyboard can scroll it sideways. */}
      <pre tabIndex={0}>
        {html && !open ? <code class="hljs" data-lang={lang} dangerouslySetInnerHTML={{ __html: html }} />
                       : <code data-lang={lang || undefined}>{code}</code>}
      </pre>
    </div>
  );
});
