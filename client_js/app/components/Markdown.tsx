import { memo } from "preact/compat";
import { useRef } from "preact/hooks";
import { emptyBlocks, renderFinished, splitBlocks, type Blocks } from "../lib/markdown";

/** One settled block: its HTML never changes, so it is never rendered again. */
const Block = memo(({ html }: { html: string }) => <div class="md-block" dangerouslySetInnerHTML={{ __html: html }} />);

/**
 * Markdown that may still be growing: settled blocks are frozen, only the last block follows the tokens.
 * Text that was already finished when it first showed (history) is rendered in one piece instead.
 */
export const Markdown = memo(function Markdown({ text, final }: { text: string; final: boolean }) {
  const blocks = useRef<Blocks | null>(final ? null : emptyBlocks());
  if (blocks.current === null) {
    return <div class="md"><div class="md-block" dangerouslySetInnerHTML={{ __html: renderFinished(text) }} /></div>;
  }
  const { blocks: next, tail } = splitBlocks(blocks.current, text, final);
  blocks.current = next;
  return (
    <div class="md">
      {next.settled.map((html, i) => <Block key={i} html={html} />)}
      {tail && <div class="md-block md-tail" dangerouslySetInnerHTML={{ __html: tail }} />}
    </div>
  );
});
