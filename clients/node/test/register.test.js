"use strict";
// register.js: `import "inngest_tools"` from a folder with no node_modules, as the daemon sets
// it up (NODE_PATH for require; NODE_OPTIONS=--require register.js, for import).

const assert = require("node:assert/strict");
const { execFile } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { after, before, test } = require("node:test");

const CLIENT = path.join(__dirname, "..");
let root;
let nodePath;
let work;

before(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "inngest-tools-hook-"));
  nodePath = path.join(root, "run time"); // a space, as NODE_OPTIONS must quote it
  work = path.join(root, "work");
  fs.mkdirSync(nodePath);
  fs.mkdirSync(work);
  fs.symlinkSync(CLIENT, path.join(nodePath, "inngest_tools"), "dir");
});

after(() => fs.rmSync(root, { recursive: true, force: true }));

function node(file, source, { hook = true, cwd = work } = {}) {
  fs.writeFileSync(path.join(cwd, file), source);
  const env = { PATH: process.env.PATH, NODE_PATH: nodePath };
  if (hook) env.NODE_OPTIONS = `--require "${path.join(nodePath, "inngest_tools", "register.js")}"`;
  return new Promise((resolve) => {
    execFile(process.execPath, [file], { cwd, env, timeout: 30000 }, (error, stdout, stderr) =>
      resolve({ code: error ? error.code : 0, stdout, stderr }),
    );
  });
}

test("an ES module imports inngest_tools, the same module require gives", async () => {
  const { code, stdout, stderr } = await node(
    "agent.mjs",
    `import { tools, ToolError, definitions } from "inngest_tools";
     import { createRequire } from "node:module";
     const required = createRequire(import.meta.url)("inngest_tools");
     console.log(JSON.stringify([typeof tools.getCustomer, typeof definitions, required.ToolError === ToolError]));`,
  );
  assert.equal(code, 0, stderr);
  assert.equal(stdout, '["function","function",true]\n');
});

test("CommonJS finds it through NODE_PATH, and import() through the hook", async () => {
  const { code, stdout, stderr } = await node(
    "agent.js",
    `const { tools } = require("inngest_tools");
     import("inngest_tools").then((esm) => console.log(esm.tools === tools));`,
  );
  assert.equal(code, 0, stderr);
  assert.equal(stdout, "true\n");
});

test("without register.js an ES module cannot find it (NODE_PATH is not enough)", async () => {
  const { code, stderr } = await node("plain.mjs", 'import "inngest_tools";', { hook: false });
  assert.notEqual(code, 0);
  assert.match(stderr, /ERR_MODULE_NOT_FOUND/);
});

test("a copy installed next to the script wins over the daemon's", async () => {
  const project = path.join(root, "project");
  const installed = path.join(project, "node_modules", "inngest_tools");
  fs.mkdirSync(installed, { recursive: true });
  fs.writeFileSync(path.join(installed, "package.json"), '{"name": "inngest_tools", "exports": "./index.mjs"}');
  fs.writeFileSync(path.join(installed, "index.mjs"), "export const local = true;");
  const { code, stdout, stderr } = await node(
    "agent.mjs",
    'import * as client from "inngest_tools"; console.log(client.local === true);',
    { cwd: project },
  );
  assert.equal(code, 0, stderr);
  assert.equal(stdout, "true\n");
});

test("other imports are untouched", async () => {
  const { code, stdout, stderr } = await node(
    "other.mjs",
    'import path from "node:path"; import("no-such-package").catch((e) => console.log(path.sep, e.code));',
  );
  assert.equal(code, 0, stderr);
  assert.equal(stdout, "/ ERR_MODULE_NOT_FOUND\n");
});

test("a script that never says import starts without the hook (and so cannot import the client)", async () => {
  // The one case left out: a CommonJS entry that imports the client without the word "import".
  const { code, stdout, stderr } = await node(
    "require-only.js",
    `const { tools } = require("inngest_tools");
     const load = new Function("specifier", "return im" + "port(specifier)");
     load("inngest_tools").then(() => console.log("hooked"), (error) => console.log(error.code, typeof tools.x));`,
  );
  assert.equal(code, 0, stderr);
  assert.equal(stdout, "ERR_MODULE_NOT_FOUND function\n");
});

// The one import that never says "import" where the preload could read it.
const HIDDEN_IMPORT = `const load = new Function("specifier", "return im" + "port(specifier)");
  load("inngest_tools").then(() => console.log("hooked"), (error) => console.log(error.code));`;

function nodeWith(args, { input } = {}) {
  const env = {
    PATH: process.env.PATH,
    NODE_PATH: nodePath,
    NODE_OPTIONS: `--require "${path.join(nodePath, "inngest_tools", "register.js")}"`,
  };
  return new Promise((resolve, reject) => {
    const child = execFile(process.execPath, args, { cwd: work, env, timeout: 30000 }, (error, out) =>
      error ? reject(error) : resolve(out),
    );
    child.stdin.end(input ?? "");
  });
}

test("-e code that says import gets the hook", async () => {
  const code = 'import { tools } from "inngest_tools"; console.log(typeof tools.x);';
  assert.equal(await nodeWith(["--input-type=module", "-e", code]), "function\n");
});

test("-e code that never says import starts without the hook, as a require-only file does", async () => {
  assert.equal(await nodeWith(["-e", HIDDEN_IMPORT]), "ERR_MODULE_NOT_FOUND\n");
});

test("code from stdin, which the preload cannot read, gets the hook", async () => {
  assert.equal(await nodeWith(["-"], { input: HIDDEN_IMPORT }), "hooked\n");
});
