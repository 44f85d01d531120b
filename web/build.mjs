// Builds the pages herald serves into OUTDIR (dist/, committed): for the phone port
// chat.js (src/chat.ts and the SDK, bundled by esbuild), the HTML, CSS, web app manifest
// and icons (drawn by icons.mjs into src/icons) as they are, and the service worker sw.js
// (src/sw.ts, given the list of those files and a cache name from their hash); for the
// admin port the owner's console in console/ and the in-tab gadget in
// gadget/ (src/console and src/gadget, the same way; the gadget's device core is
// crates/tab-gadget, built by cargo for wasm32 into gadget/device.wasm).
// `--check OUTDIR` builds into a temporary directory instead and fails unless the
// result equals OUTDIR byte for byte, so the committed assets cannot drift from the source.
// Usage: node build.mjs dist | node build.mjs --check dist
import { build } from "esbuild";
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
process.chdir(here);
const args = process.argv.slice(2);
const check = args[0] === "--check";
const target = args[check ? 1 : 0] ?? "dist";
const out = check ? mkdtempSync(join(tmpdir(), "herald-web-")) : target;

/** The files herald serves, in the order crates/pages lists them. */
const COPIED = [
  "index.html",
  "avatar.html",
  "chat.css",
  "manifest.webmanifest",
  "icons/icon-192.png",
  "icons/icon-512.png",
  "icons/icon-maskable-512.png",
  "icons/apple-touch-icon.png",
  "console/index.html",
  "console/console.css",
  "gadget/index.html",
  "gadget/gadget.css",
];
/** Bundled scripts: source, and where the bundle goes under OUTDIR. */
const BUNDLES = [
  ["src/chat.ts", "chat.js"],
  ["src/console/console.ts", "console/console.js"],
  ["src/gadget/gadget.ts", "gadget/gadget.js"],
  ["src/gadget/mic-worklet.ts", "gadget/mic-worklet.js"],
];
/**
 * What the chat's service worker keeps for when herald cannot be reached: the URL path
 * of each file and the file under OUTDIR. Everything the page and its avatar load.
 */
const OFFLINE = [
  ["/", "index.html"],
  ["/chat.js", "chat.js"],
  ["/chat.css", "chat.css"],
  ["/avatar.html", "avatar.html"],
  ["/manifest.webmanifest", "manifest.webmanifest"],
  ["/icons/icon-192.png", "icons/icon-192.png"],
  ["/icons/icon-512.png", "icons/icon-512.png"],
  ["/icons/icon-maskable-512.png", "icons/icon-maskable-512.png"],
  ["/icons/apple-touch-icon.png", "icons/apple-touch-icon.png"],
];

/** esbuild's options for every bundle. */
const BUNDLE = {
  bundle: true,
  format: "esm",
  target: "es2020",
  platform: "browser",
  charset: "utf8",
  legalComments: "none",
  logLevel: "warning",
};

mkdirSync(out, { recursive: true });
for (const [entry, bundle] of BUNDLES) {
  await build({ ...BUNDLE, entryPoints: [entry], outfile: join(out, bundle) });
}
for (const f of COPIED) {
  mkdirSync(dirname(join(out, f)), { recursive: true });
  copyFileSync(join("src", f), join(out, f));
}
// Written, not copied: the file is data, whatever mode cargo gave it.
writeFileSync(join(out, "gadget/device.wasm"), readFileSync(buildDeviceCore()));
// The service worker last, named after what it keeps: any change to those files is a new
// cache name, so a new sw.js, which replaces the old worker and its cache.
const hash = createHash("sha256");
for (const [path, file] of OFFLINE) hash.update(`${path}\0`).update(readFileSync(join(out, file))).update("\0");
await build({
  ...BUNDLE,
  entryPoints: ["src/sw.ts"],
  outfile: join(out, "sw.js"),
  format: "iife", // a classic worker script: no `type: "module"` needed at registration
  define: {
    HERALD_CACHE: JSON.stringify(`herald-chat-${hash.digest("hex").slice(0, 16)}`),
    HERALD_ASSETS: JSON.stringify(OFFLINE.map(([path]) => path)),
  },
});

if (check) {
  // Every file under dir, as paths relative to it.
  const names = (dir) =>
    readdirSync(dir, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => relative(dir, join(e.parentPath ?? e.path, e.name)))
      .sort();
  const built = names(out);
  const committed = names(target);
  const problems = [];
  if (built.join() !== committed.join()) problems.push(`files differ: built ${built}, committed ${committed}`);
  for (const f of built) {
    if (committed.includes(f) && !readFileSync(join(out, f)).equals(readFileSync(join(target, f)))) {
      problems.push(`${target}/${f} differs from a fresh build of its source`);
    }
  }
  rmSync(out, { recursive: true, force: true });
  if (problems.length) {
    console.error(problems.join("\n") + "\nRun `npm run build` in web/ and commit web/dist.");
    process.exit(1);
  }
  console.log(`${target}: ${built.length} files, identical to a fresh build`);
}

/** The in-tab gadget's device core, built by scripts/device-core; its path. */
function buildDeviceCore() {
  try {
    return execFileSync(join(here, "../scripts/device-core"), { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }).trim();
  } catch {
    process.exit(1);
  }
}
