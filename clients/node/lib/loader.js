"use strict";
// The package's own modules, compiled from V8's code cache where the sandbox runtime has one.
//
// Node 20 compiles every CommonJS module afresh at each start, and each function again the
// first time it runs (Node 22's `module.enableCompileCache` is what this stands in for). For a
// sandboxed command that makes one tool call, that was about 2 ms of the 10 it spent beyond
// Node's own start. When the daemon lays the client out for sandboxes, `node runner.js
// --build-cache` makes a call against a stand-in daemon (lib/warmup.js) and writes each module's
// code, with the functions that call compiled, to .cache/client/; from then on modules are
// compiled from it. A cache is named by its source's size and modification time, so a file
// edited since the build has none (V8 itself checks only a source's length, and this Node's
// version and flags: a cache it rejects costs only the time it would have saved). Without a
// cache (an npm install, a checkout) modules are compiled as Node would.
//
// A module loaded here is Node's module all the same: it goes in `require.cache` under the
// path Node would give it, so `require` and this loader never make two copies of one file
// (two `ToolError` classes, say). This package's .js files come here, and those of the
// dependencies installed beneath it (@bufbuild/protobuf, in the sandbox's copy and a checkout:
// about 40 modules a first call loads); Node's own modules and anything elsewhere are Node's.

const fs = require("node:fs");
const path = require("node:path");
const vm = require("node:vm");
const Module = require("node:module");

const PACKAGE = path.dirname(__dirname);
const CACHE = path.join(PACKAGE, ".cache", "client");

/** Every module this process compiled here, for `writeCache`: path -> its vm.Script. */
const compiled = new Map();
/** How each was compiled: "cached", "rejected" (a cache V8 refused), or "compiled" (none). */
const outcomes = new Map();

/** Where the cache of `file` as it is now would be: its path, size and modification time. */
function cacheFile(file) {
  const { size, mtimeMs } = fs.statSync(file);
  // Every file here is below PACKAGE (see `ours`): its relative path is a slice, not path.relative.
  return `${CACHE}${file.slice(PACKAGE.length)}.${size}.${Math.trunc(mtimeMs)}.v8`;
}

function compile(file) {
  let cachedData;
  try {
    cachedData = fs.readFileSync(cacheFile(file));
  } catch {
    cachedData = undefined; // no cache for this source: compiled from it
  }
  const script = new vm.Script(Module.wrap(fs.readFileSync(file, "utf8")), { filename: file, cachedData });
  compiled.set(file, script);
  outcomes.set(file, cachedData === undefined ? "compiled" : script.cachedDataRejected ? "rejected" : "cached");
  return script.runInThisContext();
}

/** Whether `file` is a .js file of this package or of a dependency installed beneath it. */
function ours(file) {
  return file.startsWith(PACKAGE + path.sep) && file.endsWith(".js");
}

/** `require` for the module `owner`: the package's files (its dependencies' too) through `load`, the rest Node's. */
function requireFor(owner) {
  const directory = path.dirname(owner.filename);
  const own = (id) => {
    if (id.startsWith("./") || id.startsWith("../")) {
      // Named as they are (`./wire`, `./create.js`): no search.
      const file = path.resolve(directory, id);
      return load(file.endsWith(".js") ? file : `${file}.js`);
    }
    if (path.isAbsolute(id) && ours(id)) return load(id); // a resolved path: no search either
    if (!Module.isBuiltin(id)) {
      // A dependency: found as Node finds it (its "exports", its folder's package.json).
      const file = Module._resolveFilename(id, owner);
      if (ours(file)) return load(file);
    }
    return owner.require(id);
  };
  own.resolve = (id, options) => Module.createRequire(owner.filename).resolve(id, options);
  own.main = require.main;
  own.cache = require.cache;
  return own;
}

/**
 * The exports of the package's module at `file` (an absolute path ending in .js), loading it
 * once per process whoever asks first, this loader or `require`.
 */
function load(file) {
  const loaded = require.cache[file];
  if (loaded !== undefined) return loaded.exports;
  const owner = new Module(file, module);
  owner.filename = file;
  // Where its bare `require`s would search: worked out if one ever does (few modules do).
  let paths;
  Object.defineProperty(owner, "paths", {
    get: () => (paths ??= Module._nodeModulePaths(path.dirname(file))),
    set: (value) => {
      paths = value;
    },
    enumerable: true,
  });
  require.cache[file] = owner; // before it runs: a require cycle gets its exports so far
  try {
    compile(file).call(owner.exports, owner.exports, requireFor(owner), owner, file, path.dirname(file));
  } catch (error) {
    delete require.cache[file];
    throw error;
  }
  owner.loaded = true;
  return owner.exports;
}

/** Write the code cache of every module compiled here, with the functions run so far. */
function writeCache() {
  for (const [file, script] of compiled) {
    const target = cacheFile(file);
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.writeFileSync(target, script.createCachedData());
  }
  return [...compiled.keys()].map((file) => path.relative(PACKAGE, file));
}

/** How each module loaded here was compiled, by its path in the package (see `outcomes`). */
function cacheOutcomes() {
  return Object.fromEntries([...outcomes].map(([file, outcome]) => [path.relative(PACKAGE, file), outcome]));
}

module.exports = { PACKAGE, cacheOutcomes, load, writeCache };
