import { memo } from "preact/compat";
import { useRef } from "preact/hooks";
import { emptyBlocks, renderFinished, splitBlocks, type Blocks, type Segment } from "../lib/markdown";
import { CodeBlock } from "./CodeBlock";

/** One settled block: the same segment object each time, so it is never rendered again. */
const Block = memo(({ seg }: { seg: Segment }) => seg.kind === "code"
  ? <CodeBlock lang={seg.lang} code={seg.code} />
  : <div class="md-block" dangerouslySetInnerHTML={{ __html: seg.html }} />);

/** The block still growing: rendered again with every token, a code block shown plain until it settles. */
function Tail({ seg }: { seg: Segment }) {
  return seg.kind === "code"
    ? <div class="md-tail"><CodeBlock lang={seg.lang} code={seg.code} open /></div>
    : <div class="md-block md-tail" dangerouslySetInnerHTML={{ __html: seg.html }} />;
}

/**
 * Markdown that may still be growing: settled blocks are frozen, only the last block follows the tokens.
 * Text that was already finished when it first showed (history) is rendered in one piece instead.
 */
export const Markdown = memo(function Markdown({ text, final }: { text: string; final: boolean }) {
  const blocks = useRef<Blocks | null>(final ? null : emptyBlocks());
  if (blocks.current === null) {
    return <div class="md">{renderFinished(text).map((seg, i) => <Block key={i} seg={seg} />)}</div>;
  }
  const { blocks: next, tail } = splitBlocks(blocks.current, text, final);
  blocks.current = next;
  return (
    <div class="md">
      {next.settled.map((seg, i) => <Block key={i} seg={seg} />)}
      {tail && <Tail seg={tail} />}
    </div>
  );
});
