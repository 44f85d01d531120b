// Draws the browser chat's app icons into src/icons (committed; build.mjs copies them to
// dist/icons): a white speech bubble with three dots on the chat's blue. No image tool
// and no network: the shapes are measured per pixel, 4×4 samples each for smooth edges,
// and written as 8-bit RGBA PNGs with node's zlib.
//   icon-192.png, icon-512.png   purpose "any": a rounded square, transparent corners
//   icon-maskable-512.png        purpose "maskable": full bleed, the bubble inside the
//                                 safe zone (the middle circle of 80 % diameter)
//   apple-touch-icon.png         180 px, full bleed (iOS rounds the corners itself)
// Usage: node icons.mjs   (then `npm run build` and commit src/icons and dist/icons)
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { deflateSync } from "node:zlib";

const here = dirname(fileURLToPath(import.meta.url));
const BLUE = [0x2f, 0x6f, 0xed];
const WHITE = [0xff, 0xff, 0xff];
const SAMPLES = 4;

/** Inside a rectangle from (x0, y0) to (x1, y1) with corners of radius r. */
function inRoundedRect(x, y, x0, y0, x1, y1, r) {
  if (x < x0 || x > x1 || y < y0 || y > y1) return false;
  const cx = Math.min(Math.max(x, x0 + r), x1 - r);
  const cy = Math.min(Math.max(y, y0 + r), y1 - r);
  return (x - cx) ** 2 + (y - cy) ** 2 <= r * r;
}

/** Inside the triangle a, b, c (either winding). */
function inTriangle(x, y, [ax, ay], [bx, by], [cx, cy]) {
  const side = (px, py, qx, qy) => (qx - px) * (y - py) - (qy - py) * (x - px);
  const d1 = side(ax, ay, bx, by);
  const d2 = side(bx, by, cx, cy);
  const d3 = side(cx, cy, ax, ay);
  return (d1 >= 0 && d2 >= 0 && d3 >= 0) || (d1 <= 0 && d2 <= 0 && d3 <= 0);
}

/** The glyph in a unit box: what colour (u, v) is, or null outside it. */
function glyph(u, v) {
  for (const cu of [0.27, 0.5, 0.73]) {
    if ((u - cu) ** 2 + (v - 0.4) ** 2 <= 0.08 ** 2) return BLUE;
  }
  const body = inRoundedRect(u, v, 0, 0.08, 1, 0.72, 0.2);
  const tail = inTriangle(u, v, [0.16, 0.6], [0.44, 0.6], [0.12, 0.94]);
  return body || tail ? WHITE : null;
}

/**
 * One icon, size × size RGBA: the background (a rounded square with corner radius
 * `corner` × size, or the whole square when 0) and the glyph in a centred box `box` × size.
 */
function draw(size, corner, box) {
  const rgba = Buffer.alloc(size * size * 4);
  const g0 = (1 - box) / 2;
  for (let py = 0; py < size; py++) {
    for (let px = 0; px < size; px++) {
      let r = 0, g = 0, b = 0, a = 0;
      for (let sy = 0; sy < SAMPLES; sy++) {
        for (let sx = 0; sx < SAMPLES; sx++) {
          const x = (px + (sx + 0.5) / SAMPLES) / size;
          const y = (py + (sy + 0.5) / SAMPLES) / size;
          if (corner > 0 && !inRoundedRect(x, y, 0, 0, 1, 1, corner)) continue;
          const colour = glyph((x - g0) / box, (y - g0) / box) ?? BLUE;
          r += colour[0];
          g += colour[1];
          b += colour[2];
          a += 1;
        }
      }
      const at = (py * size + px) * 4;
      // Colours are averaged over the covered samples only (straight alpha).
      if (a > 0) rgba.set([Math.round(r / a), Math.round(g / a), Math.round(b / a), Math.round((255 * a) / SAMPLES ** 2)], at);
    }
  }
  return rgba;
}

const CRC = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(bytes) {
  let c = 0xffffffff;
  for (const byte of bytes) c = CRC[(c ^ byte) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function chunk(type, data) {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, "latin1");
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

function png(size, rgba) {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(size, 0);
  ihdr.writeUInt32BE(size, 4);
  ihdr.set([8, 6, 0, 0, 0], 8); // 8 bits, RGBA, deflate, no filter method, no interlace
  const rows = Buffer.alloc(size * (size * 4 + 1));
  for (let y = 0; y < size; y++) {
    rows[y * (size * 4 + 1)] = 0; // filter: none
    rgba.copy(rows, y * (size * 4 + 1) + 1, y * size * 4, (y + 1) * size * 4);
  }
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  return Buffer.concat([signature, chunk("IHDR", ihdr), chunk("IDAT", deflateSync(rows, { level: 9 })), chunk("IEND", Buffer.alloc(0))]);
}

const ICONS = [
  ["icon-192.png", 192, 0.22, 0.6],
  ["icon-512.png", 512, 0.22, 0.6],
  ["icon-maskable-512.png", 512, 0, 0.5],
  ["apple-touch-icon.png", 180, 0, 0.56],
];

for (const [name, size, corner, box] of ICONS) {
  const file = join(here, "src/icons", name);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, png(size, draw(size, corner, box)));
  console.log(`${file}: ${size}×${size}`);
}
