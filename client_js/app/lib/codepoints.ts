// Stream offsets count Unicode code points (the server's `len`), JavaScript strings UTF-16 units: text
// outside the Basic Multilingual Plane (most emoji) is two units but one code point.

export function codePointLength(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

/** `text` without its first `count` code points. */
export function dropCodePoints(text: string, count: number): string {
  let i = 0;
  for (let n = 0; n < count && i < text.length; n++) {
    const c = text.charCodeAt(i);
    i += c >= 0xd800 && c <= 0xdbff && i + 1 < text.length ? 2 : 1;
  }
  return text.slice(i);
}
