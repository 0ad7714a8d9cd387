"use strict";
// runner.js: what step.sandbox.typescript runs. (With tools, end to end: tests/e2e/.)

const assert = require("node:assert/strict");
const { execFile } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { afterEach, beforeEach, test } = require("node:test");

const RUNNER = path.join(__dirname, "..", "runner.js");
let dir;

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "inngest-tools-runner-"));
});

afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Run a snippet; resolves to {code, stdout, stderr, result} (result: the result file's text). */
function run(code, { args = ["snippet.ts"], resultFile = true } = {}) {
  fs.writeFileSync(path.join(dir, "snippet.ts"), code);
  const resultPath = path.join(dir, "result.json");
  const env = { PATH: process.env.PATH, TOOLBRIDGE_RESULT_PATH: resultFile ? resultPath : "" };
  return new Promise((resolve) => {
    execFile(process.execPath, [RUNNER, ...args], { cwd: dir, env, timeout: 30000 }, (error, stdout, stderr) => {
      const result = fs.existsSync(resultPath) ? fs.readFileSync(resultPath, "utf8") : undefined;
      resolve({ code: error ? error.code : 0, stdout, stderr, result });
    });
  });
}

test("the returned value is written as JSON to TOOLBRIDGE_RESULT_PATH", async () => {
  const { code, result, stdout } = await run('return { total: 120, names: ["Acme", "café"] };');
  assert.equal(code, 0);
  assert.equal(result, '{"total":120,"names":["Acme","café"]}');
  assert.equal(stdout, "");
});

test("without TOOLBRIDGE_RESULT_PATH the JSON goes to stdout", async () => {
  const { code, stdout } = await run("return [1, 2];", { resultFile: false });
  assert.equal(code, 0);
  assert.equal(stdout, "[1,2]\n");
});

test("a snippet that returns nothing returns null", async () => {
  const { code, result } = await run("const x = 1;");
  assert.equal(code, 0);
  assert.equal(result, "null");
});

test("TypeScript syntax, top-level await and imports work", async () => {
  const { code, result, stderr } = await run(`
    import path from "node:path";
    interface Customer { name: string; seats: number }
    enum Plan { Free = "free", Team = "team" }
    function first<T>(items: T[]): T { return items[0]; }
    const customer: Customer = await Promise.resolve({ name: "Acme", seats: 12 });
    return { seats: first<number>([customer.seats]) * 10, plan: Plan.Team, base: path.basename("/a/b.ts") };
  `);
  assert.equal(code, 0, stderr);
  assert.equal(result, '{"seats":120,"plan":"team","base":"b.ts"}');
});

test("tools, ToolError and definitions are defined without an import", async () => {
  const { code, result, stderr } = await run(
    "return [typeof tools.getCustomer, ToolError.name, typeof definitions, new ToolError('x') instanceof Error];",
  );
  assert.equal(code, 0, stderr);
  assert.equal(result, '["function","ToolError","function",true]');
});

test("a snippet that throws exits 1; the trace points into the snippet; the error is the last line", async () => {
  const { code, stderr, result } = await run('const a: number = 1;\n\nif (a > 0) {\n  throw new RangeError("too many");\n}\n');
  assert.equal(code, 1);
  assert.equal(result, undefined);
  assert.match(stderr, /snippet\.ts:4:9/);
  assert.equal(stderr.trim().split("\n").at(-1), "RangeError: too many");
});

test("an uncaught ToolError ends stderr with its type and message", async () => {
  const { code, stderr } = await run('await tools.getCustomer("cus_1");');
  assert.equal(code, 1);
  assert.match(stderr.trim().split("\n").at(-1), /^ToolError: NotConfigured: not connected to a toolbridge daemon/);
});

test("a snippet that does not compile exits 1 saying where", async () => {
  const { code, stderr } = await run("const x = 1;\nreturn x +;");
  assert.equal(code, 1);
  assert.match(stderr, /snippet\.ts:2:11: Expression expected\. \(TS1109\)/);
});

test("a value that is not JSON exits 3", async () => {
  for (const value of ["NaN", "() => 1", "10n", "[Infinity]"]) {
    const { code, stderr, result } = await run(`return ${value};`);
    assert.equal(code, 3, value);
    assert.match(stderr, /^the snippet returned a value that is not JSON/);
    assert.equal(result, undefined);
  }
});

test("the runner exits when the snippet is done, whatever it left running", async () => {
  const { code, result } = await run("setInterval(() => {}, 1000);\nreturn 'done';");
  assert.equal(code, 0);
  assert.equal(result, '"done"');
});

test("the runner wants exactly one snippet", async () => {
  const { code, stderr } = await run("return 1;", { args: [] });
  assert.equal(code, 2);
  assert.match(stderr, /^usage: node runner\.js SNIPPET/);
});

/** A copy of the package with its dependencies but without typescript (an optional peer). */
function copyWithoutTypeScript() {
  const copy = path.join(dir, "node_path", "inngest_tools");
  const source = path.join(__dirname, "..");
  for (const entry of ["index.js", "index.mjs", "runner.js", "register.js", "package.json", "lib", "proto"]) {
    fs.cpSync(path.join(source, entry), path.join(copy, entry), { recursive: true });
  }
  const protobuf = path.join("node_modules", "@bufbuild", "protobuf");
  fs.cpSync(path.join(source, protobuf), path.join(copy, protobuf), { recursive: true });
  return copy;
}

test("without typescript: require works, the runner says what to install, the client's cache still builds", async () => {
  const copy = copyWithoutTypeScript();
  const env = { PATH: process.env.PATH, NODE_PATH: path.dirname(copy) };
  const node = (args) =>
    new Promise((resolve) => {
      execFile(process.execPath, args, { cwd: dir, env, timeout: 30000 }, (error, stdout, stderr) =>
        resolve({ code: error ? error.code : 0, stdout, stderr }),
      );
    });
  const required = await node(["-e", "const c = require('inngest_tools'); console.log(typeof c.tools.x, typeof c.ToolError)"]);
  assert.deepEqual([required.code, required.stdout], [0, "function function\n"], required.stderr);
  fs.writeFileSync(path.join(dir, "snippet.ts"), "return 1;");
  const ran = await node([path.join(copy, "runner.js"), "snippet.ts"]);
  assert.equal(ran.code, 4);
  assert.equal(
    ran.stderr,
    "the TypeScript runner needs the typescript package, an optional peer dependency of inngest_tools " +
      "that is not installed: run `npm install typescript` where inngest_tools is installed\n",
  );
  const built = await node([path.join(copy, "runner.js"), "--build-cache"]);
  assert.equal(built.code, 0, built.stderr);
  assert.ok(!fs.existsSync(path.join(copy, ".cache", "typescript.v8")));
  assert.ok(fs.readdirSync(path.join(copy, ".cache", "client", "lib")).some((name) => name.startsWith("connection.js.")));
});
