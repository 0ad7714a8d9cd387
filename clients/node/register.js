"use strict";
// Preloaded into every Node command by the daemon (NODE_OPTIONS=--require=<this file>), so
// that `import ... from "inngest_tools"` works from a script in any folder.
//
// `require` finds the client through NODE_PATH, which ES modules ignore: they need a resolve
// hook (lib/resolve.mjs). In Node 20 hooks run on a loader thread that costs about 0.1 s to
// start, so the hook is registered only when the entry may import: an .mjs or .mts file, a
// file or `node -e` / `-p` code whose text says `import` or `export` anywhere (ES module
// syntax, or an `import()` in CommonJS), or code this cannot read (stdin). A CommonJS script
// that only uses `require`, like the seed's agent.js, starts as fast as plain Node, and so
// does `node -e "require(...)..."` (about 40 ms sooner than with the hook).

const fs = require("node:fs");
const path = require("node:path");
const { register } = require("node:module");
const { pathToFileURL } = require("node:url");

const MAY_IMPORT = /\b(?:import|export)\b/;
const SCANNED_BYTES = 1024 * 1024;

function mayImport(entry) {
  // -e and -p code: Node has put it in process._eval before any preload runs. Not a public
  // property: where it is missing, eval'd code is hooked, as stdin is.
  if (typeof process._eval === "string") return MAY_IMPORT.test(process._eval);
  if (!entry) return true;
  const file = path.resolve(entry);
  if (/\.m[jt]s$/.test(file)) return true;
  let text;
  try {
    const fd = fs.openSync(file, "r");
    try {
      const buffer = Buffer.allocUnsafe(Math.min(fs.fstatSync(fd).size, SCANNED_BYTES));
      text = buffer.toString("utf8", 0, fs.readSync(fd, buffer, 0, buffer.length, 0));
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return true; // not a file we can read (a directory, a package): cannot tell, so hook
  }
  return MAY_IMPORT.test(text);
}

if (mayImport(process.argv[1])) register("./lib/resolve.mjs", pathToFileURL(__filename));
