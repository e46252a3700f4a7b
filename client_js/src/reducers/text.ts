/**
 * Stream offsets count Unicode code points (the server's `len`), while JavaScript strings count UTF-16 units.
 * These helpers measure and cut strings in code points.
 */

/** The length of `s` in code points. */
export function cpLength(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

/** `s` from code point `start` on. */
export function cpSliceFrom(s: string, start: number): string {
  if (start <= 0) return s;
  let i = 0;
  for (let n = 0; n < start && i < s.length; n++) {
    const c = s.charCodeAt(i);
    i += c >= 0xd800 && c <= 0xdbff && i + 1 < s.length ? 2 : 1;
  }
  return s.slice(i);
}
