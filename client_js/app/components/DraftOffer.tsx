import { useStore } from "@nanostores/preact";
import { useEffect } from "preact/hooks";
import { $composerText, $draftOffer, keepMine, takeDraft } from "../stores/presence";

/** A draft typed on another device, offered above the composer (never put in it unasked), and the composer's
 * text set from the draft store (a draft taken, or one sent elsewhere). */
export function DraftOffer({ text, setText }: { text: string; setText: (text: string) => void }) {
  const offer = useStore($draftOffer);
  const replace = useStore($composerText);
  useEffect(() => {
    if (replace) {
      setText(replace.text);
      $composerText.set(null);
    }
  }, [replace]);
  if (!offer) return null;
  const from = offer.deviceName || "another device";
  return (
    <div class="draft-offer" role="group" aria-label="Draft from another device">
      <p>{text ? `${from} has a newer draft:` : `Draft from ${from}:`} <q>{offer.text.slice(0, 120)}</q></p>
      <button type="button" onClick={takeDraft}>{text ? "Use that draft instead" : "Use draft"}</button>
      <button type="button" onClick={keepMine}>{text ? "Keep mine" : "Dismiss"}</button>
    </div>
  );
}
