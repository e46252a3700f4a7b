import { useEffect, useRef, useState } from "preact/hooks";

/**
 * A button for something that cannot be taken back: the first press asks (the question and a "Yes, …" button,
 * which takes the focus) and only that confirms; "Cancel" or Esc keeps things as they are.
 */
export function ConfirmButton({ label, question, confirm, onConfirm, danger = true }: {
  label: string; question: string; confirm: string; onConfirm: () => void; danger?: boolean;
}) {
  const [asking, setAsking] = useState(false);
  const yes = useRef<HTMLButtonElement>(null);
  const opener = useRef<HTMLButtonElement>(null);
  useEffect(() => { if (asking) yes.current?.focus(); }, [asking]);
  const cancel = () => { setAsking(false); requestAnimationFrame(() => opener.current?.focus()); };
  if (!asking) {
    return <button type="button" ref={opener} class={danger ? "danger" : undefined} onClick={() => setAsking(true)}>{label}</button>;
  }
  return (
    <span role="group" aria-label={question} class="confirm"
          onKeyDown={(e) => { if (e.key === "Escape") { e.stopPropagation(); cancel(); } }}>
      <span class="confirm-question">{question}</span>
      <button type="button" ref={yes} class={danger ? "danger" : undefined}
              onClick={() => { setAsking(false); onConfirm(); }}>{confirm}</button>
      <button type="button" onClick={cancel}>Cancel</button>
    </span>
  );
}
