"use strict";
// lib/loader.js: one copy of each module whoever loads it, and the code cache a build writes
// used by the next process, or refused (and the module compiled from source) when it is
// stale or broken. The build runs in a copy of the package, as the daemon's does.

const assert = require("node:assert/strict");
const { execFileSync } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { after, test } = require("node:test");

const { PACKAGE, load } = require("../lib/loader");

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "inngest-tools-loader-"));
after(() => fs.rmSync(scratch, { recursive: true, force: true }));

test("the loader and require share one copy of each module, whichever comes first", () => {
  const errors = load(path.join(PACKAGE, "lib", "errors.js"));
  assert.equal(require("../lib/errors"), errors);
  const wire = require("../lib/wire");
  assert.equal(load(path.join(PACKAGE, "lib", "wire.js")), wire);
  // The package's entry loads through the loader: its ToolError is the one lib/errors.js has.
  assert.equal(require("../index.js").ToolError, errors.ToolError);
});

test("a module that throws while loading is not kept: the next load runs it again", () => {
  const file = path.join(scratch, "throws-once.js");
  const source = 'if (!globalThis.__ranOnce) { globalThis.__ranOnce = true; throw new Error("first"); }';
  fs.writeFileSync(file, `${source}\nmodule.exports = 2;\n`);
  assert.throws(() => load(file), /first/);
  assert.equal(require.cache[file], undefined);
  assert.equal(load(file), 2);
});

/**
 * A copy of the package to build in, its dependencies where Node finds them: @bufbuild/protobuf
 * copied beneath it, as the daemon lays it out for sandboxes (a symlink would resolve outside).
 */
function packageCopy() {
  const copy = path.join(scratch, "runtime", "inngest_tools");
  fs.mkdirSync(copy, { recursive: true });
  for (const entry of ["index.js", "runner.js", "register.js", "package.json", "lib", "proto"]) {
    fs.cpSync(path.join(PACKAGE, entry), path.join(copy, entry), { recursive: true });
  }
  const modules = path.join(copy, "node_modules");
  fs.cpSync(path.join(PACKAGE, "node_modules", "@bufbuild", "protobuf"), path.join(modules, "@bufbuild", "protobuf"), {
    recursive: true,
  });
  fs.symlinkSync(path.join(PACKAGE, "node_modules", "typescript"), path.join(modules, "typescript"));
  return copy;
}

/** How a fresh process compiles the client's modules: the entry, then the connection's. */
function outcomesIn(copy) {
  const code = `
    require(${JSON.stringify(copy)});
    const loader = require(${JSON.stringify(path.join(copy, "lib", "loader.js"))});
    loader.load(${JSON.stringify(path.join(copy, "lib", "connection.js"))});
    process.stdout.write(JSON.stringify(loader.cacheOutcomes()));
  `;
  return JSON.parse(execFileSync(process.execPath, ["-e", code], { encoding: "utf8" }));
}

test("a build writes each module's code cache; the next process compiles from it, or from source once edited or broken", () => {
  const copy = packageCopy();
  assert.ok(Object.values(outcomesIn(copy)).every((outcome) => outcome === "compiled")); // no cache yet
  execFileSync(process.execPath, [path.join(copy, "runner.js"), "--build-cache"], { cwd: copy });
  const outcomes = outcomesIn(copy);
  // The generated messages and @bufbuild/protobuf, installed beneath the package, are cached too.
  const runtime = "node_modules/@bufbuild/protobuf/dist/cjs";
  for (const module of ["lib/client.js", "lib/connection.js", "lib/transport.js", "lib/proto.js", "proto/toolbridge/v1/toolbridge_pb.js", `${runtime}/to-binary.js`, `${runtime}/codegenv2/index.js`]) {
    assert.equal(outcomes[module], "cached", module);
  }
  assert.ok(Object.values(outcomes).every((outcome) => outcome === "cached"), JSON.stringify(outcomes));

  const [grpcCache] = fs.readdirSync(path.join(copy, ".cache", "client", "lib")).filter((name) => name.startsWith("grpc.js."));
  fs.writeFileSync(path.join(copy, ".cache", "client", "lib", grpcCache), Buffer.from("not a code cache"));
  // An edit that keeps the length, which V8's own check would not see: the time tells.
  const tls = path.join(copy, "lib", "tls.js");
  fs.writeFileSync(tls, fs.readFileSync(tls, "utf8").replace("speaks clear text", "speaks clear-text"));
  fs.utimesSync(tls, new Date(), new Date(Date.now() + 5000));
  const edited = outcomesIn(copy);
  assert.equal(edited["lib/grpc.js"], "rejected");
  assert.equal(edited["lib/tls.js"], "compiled");
  assert.equal(edited["lib/transport.js"], "cached");
});
