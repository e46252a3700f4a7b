// A real PNG of a given size and colour (signature, IHDR, one zlib IDAT, IEND), so the server's sniffing
// sees the bytes of an image and not a label.
import { crc32, deflateSync } from 'node:zlib';

function chunk(type, data) {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, 'ascii');
  data.copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}

/** `colour` is one `[r, g, b]` for every pixel, or a function `(x, y) => [r, g, b]`. */
export function png(width = 8, height = 8, colour = [200, 60, 20]) {
  const at = typeof colour === 'function' ? colour : () => colour;
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 2, 0, 0, 0], 8); // 8-bit RGB, no interlace
  const row = (y) => Buffer.from([0, ...Array.from({ length: width }, (_, x) => at(x, y)).flat()]);
  const raw = Buffer.concat(Array.from({ length: height }, (_, y) => row(y)));
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}
