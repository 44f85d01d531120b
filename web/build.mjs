// Builds the pages herald serves on the phone port into OUTDIR (dist/, committed):
// chat.js (src/chat.ts and the SDK, bundled by esbuild), and the HTML and CSS as they
// are. `--check OUTDIR` builds into a temporary directory instead and fails unless the
// result equals OUTDIR byte for byte, so the committed assets cannot drift from the source.
// Usage: node build.mjs dist | node build.mjs --check dist
import { build } from "esbuild";
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
process.chdir(here);
const args = process.argv.slice(2);
const check = args[0] === "--check";
const target = args[check ? 1 : 0] ?? "dist";
const out = check ? mkdtempSync(join(tmpdir(), "herald-web-")) : target;

/** The files herald serves, in the order web.rs lists them. */
const COPIED = ["index.html", "avatar.html", "chat.css"];

mkdirSync(out, { recursive: true });
await build({
  entryPoints: ["src/chat.ts"],
  outfile: join(out, "chat.js"),
  bundle: true,
  format: "esm",
  target: "es2020",
  platform: "browser",
  charset: "utf8",
  legalComments: "none",
  logLevel: "warning",
});
for (const f of COPIED) copyFileSync(join("src", f), join(out, f));

if (check) {
  const names = (dir) => readdirSync(dir).sort();
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
