// The browser gadget's numbers (its clocks, the longest text) come from the `limits` of
// vectors/gadget-v1.json, the file every implementation is pinned to, rather than being
// copied from crates/gadget-proto/src/limits.rs by hand. build.mjs and the gadget's node
// test both bundle web/src/gadget with this esbuild `define`; proto.ts declares it.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const vectors = join(dirname(fileURLToPath(import.meta.url)), "../vectors/gadget-v1.json");

/** esbuild's `define` that gives HERALD_GADGET_LIMITS its value. */
export function gadgetLimits() {
  const { limits } = JSON.parse(readFileSync(vectors, "utf8"));
  return { HERALD_GADGET_LIMITS: JSON.stringify(limits) };
}
