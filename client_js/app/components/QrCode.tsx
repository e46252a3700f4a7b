import { useEffect, useState } from "preact/hooks";

/** `text` as a QR code, drawn as one SVG path (no inline styles or scripts: the page's CSP stays strict). The
 * encoder (`qr`, no dependencies) is loaded when a code is first shown, so the first paint does not pay for it. */
export function QrCode({ text, label }: { text: string; label: string }) {
  const [modules, setModules] = useState<boolean[][] | null>(null);
  useEffect(() => {
    let live = true;
    void import("qr").then(({ default: encodeQR }) => {
      // A 4-module light border: the quiet zone scanners need around the code.
      if (live) setModules(encodeQR(text, "raw", { ecc: "medium", border: 4 }));
    }).catch(() => {}); // the link next to it still works
    return () => { live = false; };
  }, [text]);
  if (!modules) return null;
  const box = modules.length;
  let path = "";
  modules.forEach((row, y) => row.forEach((dark, x) => { if (dark) path += `M${x} ${y}h1v1h-1z`; }));
  return (
    <svg class="qr" role="img" aria-label={label} viewBox={`0 0 ${box} ${box}`} width="220" height="220"
         shape-rendering="crispEdges" data-modules={box}>
      <rect width={box} height={box} fill="#fff" />
      <path d={path} fill="#000" />
    </svg>
  );
}
