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

/** A piece of streamed text at a code point offset. */
export interface HeldDelta {
  offset: number;
  delta: string;
}

/**
 * Grow `text` (of `length` code points) by `incoming` and by what was `held`: a piece whose range is already
 * there is dropped, one that starts past the end is held until the text reaches it, and the part of any other
 * piece past the end is appended.
 */
export function assemble(
  text: string,
  length: number,
  held: readonly HeldDelta[],
  incoming: readonly HeldDelta[],
): { text: string; length: number; held: HeldDelta[] } {
  let pending = [...held, ...incoming];
  for (let progressed = true; progressed && pending.length; ) {
    progressed = false;
    const rest: HeldDelta[] = [];
    for (const d of pending) {
      const end = d.offset + cpLength(d.delta);
      if (end <= length) continue;
      if (d.offset > length) {
        rest.push(d);
        continue;
      }
      text += cpSliceFrom(d.delta, length - d.offset);
      length = end;
      progressed = true;
    }
    pending = rest;
  }
  return { text, length, held: pending };
}
