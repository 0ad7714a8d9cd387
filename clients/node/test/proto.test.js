"use strict";
// lib/proto.js: the messages protobuf-es generated from proto/, against bytes written by
// Python's protobuf (the hex below), for what the shared wire vectors (tests/vectors/wire.json)
// do not reach; and the @bufbuild/protobuf modules it takes by path, not by its index.

const assert = require("node:assert/strict");
const path = require("node:path");
const { test } = require("node:test");

const proto = require("../lib/proto");
const { CallToolStreamResponseSchema: STREAM_RESPONSE } = proto;
const contract = require("../proto/toolbridge/v1/toolbridge_pb.js");

const hex = (text) => Buffer.from(text, "hex");
const asHex = (bytes) => Buffer.from(bytes).toString("hex");

test("a status answer: a call id past 2**32 and a negative int32", () => {
  const bytes = "088380808080201a0f08fbffffffffffffffff0112026e6f";
  const answer = proto.decode(STREAM_RESPONSE, hex(bytes));
  assert.equal(answer.callId, 2n ** 40n + 3n);
  assert.equal(answer.answer.case, "status");
  assert.deepEqual([answer.answer.value.code, answer.answer.value.message], [-5, "no"]);
  assert.deepEqual(answer.more, []);
  assert.equal(asHex(proto.encode(STREAM_RESPONSE, answer)), bytes);
});

test("a waiting answer: its int64 expiry, both ways; a negative one is ten bytes", () => {
  const bytes = "0807221a0a0272311208617070726f76616c1a036f6b3f20fbd095ffbc31";
  const answer = proto.decode(STREAM_RESPONSE, hex(bytes));
  assert.equal(answer.answer.case, "waiting");
  assert.equal(answer.answer.value.expiresAtMs, 1_700_000_000_123n);
  assert.equal(asHex(proto.encode(STREAM_RESPONSE, answer)), bytes);
  const negative = "2085afea80c3ceffffff01";
  const waiting = proto.decode(contract.CallWaitingSchema, hex(negative));
  assert.equal(waiting.expiresAtMs, -1_700_000_000_123n);
  assert.equal(asHex(proto.encode(contract.CallWaitingSchema, waiting)), negative);
});

test("a oneof member holding its default is still written and read as set", () => {
  const bytes = "0a001a016b";
  const response = proto.decode(contract.CallToolResponseSchema, hex(bytes));
  assert.equal(response.outcome.case, "resultJson");
  assert.equal(response.outcome.value.length, 0);
  assert.equal(response.stepKey, "k");
  assert.equal(asHex(proto.encode(contract.CallToolResponseSchema, response)), bytes);
});

test("fields this contract does not know (from a newer daemon) are skipped, of every wire type", () => {
  const status = proto.decode(contract.CallStatusSchema, hex("08032a0378797a30013d01020304390102030405060708"));
  assert.deepEqual([status.code, status.message], [3, ""]);
});

test("a truncated message is refused, not read past its end", () => {
  assert.throws(() => proto.decode(STREAM_RESPONSE, hex("0807221a0a02")));
  assert.throws(() => proto.decode(STREAM_RESPONSE, hex("08ff")));
});

test("the method paths are the service's, as gRPC names them", () => {
  assert.deepEqual(proto.PATHS, {
    CallToolStream: "/toolbridge.v1.ToolBridgeService/CallToolStream",
    ListTools: "/toolbridge.v1.ToolBridgeService/ListTools",
  });
});

test("the @bufbuild/protobuf modules taken by path are that package's own, never its index", () => {
  // lib/proto.js takes create, toBinary, fromBinary and the binary writer from their modules;
  // if a new version moves them, this fails rather than the client at its first call.
  const runtime = path.dirname(require.resolve("@bufbuild/protobuf"));
  assert.equal(require.cache[require.resolve("@bufbuild/protobuf")], undefined, "lib/proto.js loaded the index");
  for (const [file, name] of [
    ["create.js", "create"],
    ["to-binary.js", "toBinary"],
    ["from-binary.js", "fromBinary"],
    [path.join("wire", "binary-encoding.js"), "BinaryWriter"],
  ]) {
    assert.equal(typeof require(path.join(runtime, file))[name], "function", file);
  }
  const installed = require(path.join(runtime, "..", "..", "package.json")).version;
  assert.equal(require("../package.json").dependencies["@bufbuild/protobuf"], installed); // pinned exactly
});
