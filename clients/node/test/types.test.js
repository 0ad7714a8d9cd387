"use strict";
// The TypeScript declarations (index.d.ts, index.d.mts), checked with the TypeScript compiler.

const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const { test } = require("node:test");
const ts = require("typescript");

const FIXTURES = path.join(__dirname, "types");
const OPTIONS = {
  strict: true,
  noEmit: true,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  target: ts.ScriptTarget.ES2022,
  lib: ["lib.es2022.d.ts"],
  types: [],
};

const FILES = ["consumer.ts", "consumer.mts", "misuse.ts"];
let diagnostics;

/** ["file:line", message] of every error in `file`; one program checks all the fixtures. */
function errors(file) {
  if (diagnostics === undefined) {
    const program = ts.createProgram(
      FILES.map((name) => path.join(FIXTURES, name)),
      OPTIONS,
    );
    diagnostics = ts.getPreEmitDiagnostics(program).map((diagnostic) => {
      const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n");
      if (!diagnostic.file) return ["", message];
      const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
      return [`${path.basename(diagnostic.file.fileName)}:${line + 1}`, message];
    });
  }
  // Errors outside the fixtures (in the declarations themselves) count against every file.
  const inFixture = (where, name) => where.startsWith(`${name}:`);
  return diagnostics.filter(([where]) => inFixture(where, file) || !FILES.some((name) => inFixture(where, name)));
}

test("a CommonJS consumer type-checks: tools, ToolError, definitions, merged signatures", () => {
  assert.deepEqual(errors("consumer.ts"), []);
});

test("an ES module consumer type-checks, default import included", () => {
  assert.deepEqual(errors("consumer.mts"), []);
});

test("misuse is caught: a bad format, wrong field types, merged signatures, missing await", () => {
  const source = fs.readFileSync(path.join(FIXTURES, "misuse.ts"), "utf8").split("\n");
  const expected = source.flatMap((line, index) => (line.endsWith("// ERROR") ? [`misuse.ts:${index + 1}`] : []));
  assert.equal(expected.length, 5);
  assert.deepEqual(errors("misuse.ts").map(([where]) => where), expected);
});
