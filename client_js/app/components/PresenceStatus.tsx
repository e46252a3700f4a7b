import { useStore } from "@nanostores/preact";
import { $others } from "../stores/presence";

function names(list: readonly { deviceName: string }[]): string {
  const unique = [...new Set(list.map((d) => d.deviceName || "another device"))];
  return unique.length <= 1 ? (unique[0] ?? "") : `${unique.slice(0, -1).join(", ")} and ${unique[unique.length - 1]}`;
}

/** "Also open on <device>" and "<device> is typing…": the user's other devices on this chat (a status region,
 * so screen readers hear it change). */
export function PresenceStatus() {
  const others = useStore($others);
  const typing = others.filter((d) => d.typing);
  return (
    <p class="presence" role="status">
      {others.length > 0 && <span>Also open on {names(others)}</span>}
      {typing.length > 0 && <span class="typing"> · {names(typing)} {typing.length > 1 ? "are" : "is"} typing…</span>}
    </p>
  );
}
