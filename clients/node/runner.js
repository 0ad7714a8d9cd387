#!/usr/bin/env node
"use strict";
// `node runner.js SNIPPET.ts`: run a TypeScript snippet with `tools` defined, top-level
// `await` and `return` (what `step.sandbox.typescript` runs).
//
// `node runner.js --build-cache` writes a V8 code cache of the TypeScript compiler next to this
// file, and one of the client's own modules (lib/loader.js); the daemon does it once when it
// lays the client out for sandboxes. Loading TypeScript costs about 0.4 s without it and a
// third of that with it.
//
// The snippet is transpiled (types stripped, not checked) into the body of an async function
// taking `tools`, `ToolError` and `definitions`; stack traces point into the snippet through
// an inline source map. The JSON of the returned value goes to the file named by
// TOOLBRIDGE_RESULT_PATH (stdout without it). Exit codes: 0 done, 1 the snippet threw or does
// not compile, 2 usage, 3 the returned value is not JSON, 4 TypeScript is not installed.
//
// `typescript` is an optional peer dependency of inngest_tools: `require("inngest_tools")` never
// loads it, and only this runner needs it (the toolbridge wheel carries it for the daemon's own
// snippets). Without it the runner says what to install.

const fs = require("node:fs");
const path = require("node:path");
const Module = require("node:module");
const util = require("node:util");
const vm = require("node:vm");
const { ToolError, definitions, tools } = require("./index.js");
const { load, writeCache } = require("./lib/loader");
const { strictJSON } = require("./lib/wire");

const PARAMETERS = "tools, ToolError, definitions";
const SOURCE_MAP_COMMENT = /\n\/\/# sourceMappingURL=[^\n]*\s*$/;

const CODE_CACHE = path.join(__dirname, ".cache", "typescript.v8");

class SnippetSyntaxError extends SyntaxError {}

/** TypeScript cannot be found from here: what to install, in one line. */
class TypeScriptMissingError extends Error {
  constructor() {
    super(
      "the TypeScript runner needs the typescript package, an optional peer dependency of inngest_tools " +
        "that is not installed: run `npm install typescript` where inngest_tools is installed",
    );
  }
}

/** Where `typescript` resolves from here. @throws {TypeScriptMissingError} when nowhere. */
function typeScriptFile() {
  try {
    return require.resolve("typescript");
  } catch (error) {
    if (error.code === "MODULE_NOT_FOUND") throw new TypeScriptMissingError();
    throw error;
  }
}

/**
 * The TypeScript compiler, compiled from the V8 code cache when there is one. V8 checks that
 * the cache matches the source and this Node; a cache it rejects costs only the time it saves.
 */
function loadTypeScript({ cachedData } = {}) {
  const file = typeScriptFile();
  const script = new vm.Script(Module.wrap(fs.readFileSync(file, "utf8")), { filename: file, cachedData });
  const compiled = new Module(file, module);
  compiled.filename = file;
  compiled.paths = Module._nodeModulePaths(path.dirname(file));
  script.runInThisContext()(compiled.exports, Module.createRequire(file), compiled, file, path.dirname(file));
  return { ts: compiled.exports, script };
}

let typescript;

function compiler() {
  if (typescript === undefined) {
    let cachedData;
    try {
      cachedData = fs.readFileSync(CODE_CACHE);
    } catch {
      typescript = require(typeScriptFile());
      return typescript;
    }
    typescript = loadTypeScript({ cachedData }).ts;
  }
  return typescript;
}

/**
 * Write the code caches: TypeScript's after a transpile, the client's after a warm-up call,
 * so that the functions those run are compiled in them too.
 */
async function buildCache() {
  let loaded = null;
  try {
    loaded = loadTypeScript();
  } catch (error) {
    if (!(error instanceof TypeScriptMissingError)) throw error; // no TypeScript: no snippets to speed up
  }
  if (loaded !== null) {
    typescript = loaded.ts;
    transpile("const warm: number = await Promise.resolve(1);\nreturn warm;", "warm.ts");
    fs.mkdirSync(path.dirname(CODE_CACHE), { recursive: true });
    fs.writeFileSync(CODE_CACHE, loaded.script.createCachedData());
  }
  await load(path.join(__dirname, "lib", "warmup.js")).warmUp();
  writeCache();
}

function transpile(source, filename) {
  const ts = compiler();
  const output = ts.transpileModule(source, {
    fileName: path.basename(filename),
    reportDiagnostics: true,
    compilerOptions: {
      module: ts.ModuleKind.CommonJS,
      target: ts.ScriptTarget.ES2022,
      esModuleInterop: true,
      inlineSourceMap: true,
      inlineSources: true,
    },
  });
  if (output.diagnostics.length > 0) {
    const problems = output.diagnostics.map((diagnostic) => {
      const text = ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n");
      if (diagnostic.file === undefined || diagnostic.start === undefined) return text;
      const { line, character } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
      return `${filename}:${line + 1}:${character + 1}: ${text} (TS${diagnostic.code})`;
    });
    throw new SnippetSyntaxError(`the snippet does not compile:\n${problems.join("\n")}`);
  }
  return output.outputText;
}

/** The snippet as an async function of (tools, ToolError, definitions). */
function compile(source, filename) {
  const code = transpile(source, filename);
  const map = SOURCE_MAP_COMMENT.exec(code);
  const body = map === null ? code : code.slice(0, map.index);
  // The wrapper opens on the snippet's first line, so lines keep their numbers; the source
  // map stays the file's last line, where Node looks for it.
  const sourceMap = map === null ? "" : map[0];
  const wrapped = `module.exports = async function snippet(${PARAMETERS}) {${body}\n};${sourceMap}`;
  const snippet = new Module(filename, null);
  snippet.filename = filename;
  snippet.paths = Module._nodeModulePaths(path.dirname(filename));
  // Module#_compile is how CommonJS compiles a file (and registers its source map); it gives
  // the snippet a real `require` resolving from its own folder.
  snippet._compile(wrapped, filename);
  return snippet.exports;
}

function describe(error) {
  if (error instanceof SnippetSyntaxError || error instanceof TypeScriptMissingError) return error.message;
  if (error instanceof ToolError) {
    return `${util.inspect(error)}\nToolError: ${error.type}: ${error.message}`;
  }
  if (error instanceof Error) return `${util.inspect(error)}\n${error.name}: ${error.message}`;
  return `the snippet threw a non-Error value: ${util.inspect(error)}`;
}

async function main(argv) {
  if (argv.length === 1 && argv[0] === "--build-cache") {
    await buildCache();
    return 0;
  }
  if (argv.length !== 1) {
    process.stderr.write("usage: node runner.js SNIPPET\n");
    return 2;
  }
  process.setSourceMapsEnabled(true);
  const filename = path.resolve(argv[0]);
  const snippet = compile(fs.readFileSync(filename, "utf8"), filename);
  const value = await snippet(tools, ToolError, definitions);
  let text;
  try {
    text = strictJSON(value);
  } catch (error) {
    process.stderr.write(`the snippet returned a value that is not JSON: ${error.message}\n`);
    return 3;
  }
  const resultPath = process.env.TOOLBRIDGE_RESULT_PATH;
  if (resultPath) fs.writeFileSync(resultPath, text, "utf8");
  else process.stdout.write(`${text}\n`);
  return 0;
}

/**
 * Run `main(argv)` and exit as soon as the snippet is done, as Python's asyncio.run does:
 * whatever it left running (timers, servers, calls it did not await) ends with it.
 */
function start(argv) {
  main(argv).then(
    (code) => process.exit(code),
    (error) => {
      process.stderr.write(`${describe(error)}\n`);
      process.exit(error instanceof TypeScriptMissingError ? 4 : 1);
    },
  );
}

/**
 * Load now what a snippet's first moments would: the TypeScript compiler (from its code
 * cache), a first transpile, and the client's transport. A warm sandbox (lib/warm.js) does
 * this before it is given a snippet; nothing here reads the environment.
 */
function preload() {
  try {
    transpile("const warm: number = await Promise.resolve(1);\nreturn warm;", "warm.ts");
  } catch (error) {
    if (!(error instanceof TypeScriptMissingError)) throw error; // said again when a snippet runs
  }
  load(path.join(__dirname, "lib", "connection.js"));
  load(path.join(__dirname, "lib", "tls.js"));
}

if (require.main === module) start(process.argv.slice(2));

module.exports = { preload, start };
