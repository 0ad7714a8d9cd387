"use strict";
// The public surface: `tools`, `ToolError`, `definitions`, through `require` and `import`.

const assert = require("node:assert/strict");
const util = require("node:util");
const { test } = require("node:test");

const inngestTools = require("inngest_tools"); // the package resolving itself by name
const { ToolError, definitions, tools } = inngestTools;
const { encodeArguments } = require("../lib/wire");

test("ToolError is an Error carrying type, message, retryable and errorId", () => {
  const error = new ToolError("no such customer", { type: "NotFound", retryable: true, errorId: "err_1" });
  assert.ok(error instanceof ToolError);
  assert.ok(error instanceof Error);
  assert.equal(error.name, "ToolError");
  assert.equal(error.message, "no such customer");
  assert.deepEqual([error.type, error.retryable, error.errorId], ["NotFound", true, "err_1"]);
  assert.match(error.stack, /^ToolError: no such customer\n/);
  const plain = new ToolError("failed");
  assert.deepEqual([plain.type, plain.retryable, plain.errorId], ["ToolError", false, ""]);
});

test("tools.name is a function named after the tool, the same one each time", () => {
  assert.equal(typeof tools.getCustomer, "function");
  assert.equal(tools.getCustomer.name, "getCustomer");
  assert.equal(tools.getCustomer, tools.getCustomer);
  assert.equal(tools["get_customer_2"].name, "get_customer_2");
});

test("tools is not a promise, is shown plainly, and cannot be changed", async () => {
  assert.equal(tools.then, undefined);
  assert.equal(await Promise.resolve(tools), tools);
  assert.equal(tools[Symbol.iterator], undefined);
  assert.equal(util.inspect(tools), "[inngest_tools.tools]");
  assert.throws(() => {
    tools.getCustomer = () => 1;
  }, TypeError);
  assert.throws(() => delete tools.getCustomer, TypeError);
});

test("a tool call returns a promise, even when it fails before sending", async () => {
  const saved = [process.env.TOOLBRIDGE_ADDRESS, process.env.TOOLBRIDGE_TOKEN];
  delete process.env.TOOLBRIDGE_ADDRESS;
  try {
    const pending = tools.getCustomer("cus_1");
    assert.ok(pending instanceof Promise);
    await assert.rejects(pending, { name: "ToolError", type: "NotConfigured" });
  } finally {
    if (saved[0] !== undefined) process.env.TOOLBRIDGE_ADDRESS = saved[0];
  }
});

test("definitions is an async function", () => {
  assert.equal(typeof definitions, "function");
  assert.ok(definitions("nope").catch(() => "rejected") instanceof Promise);
});

test("trailing undefined arguments are not sent; inner ones become null", () => {
  assert.deepEqual(encodeArguments([undefined]).map(String), ["", ""]);
  assert.deepEqual(encodeArguments(["a", undefined, undefined]).map(String), ['["a"]', ""]);
  assert.deepEqual(encodeArguments([undefined, "b"]).map(String), ['[null,"b"]', ""]);
});

test("values with a toJSON travel as their JSON", () => {
  const when = new Date(Date.UTC(2026, 0, 2, 3, 4, 5));
  assert.equal(encodeArguments([when])[0].toString(), '["2026-01-02T03:04:05.000Z"]');
});

test("import gives the same objects as require", async () => {
  const esm = await import("inngest_tools");
  assert.equal(esm.tools, tools);
  assert.equal(esm.ToolError, ToolError);
  assert.equal(esm.definitions, definitions);
  assert.equal(esm.default, inngestTools);
});
