"use strict";
// lib/codec.js against bytes written by Python's protobuf (the hex below), for what the
// shared wire vectors (tests/vectors/wire.json) do not reach: negative and 64-bit integers,
// a waiting answer, repeated messages, a oneof member holding its default, unknown fields.

const assert = require("node:assert/strict");
const { test } = require("node:test");

const { Codec } = require("../lib/codec");
const contract = require("../proto/toolbridge/v1/toolbridge.js");

const codec = new Codec(contract);
const STREAM_RESPONSE = "toolbridge.v1.CallToolStreamResponse";
const hex = (text) => Buffer.from(text, "hex");

test("a status answer: a call id past 2**32 and a negative int32", () => {
  const bytes = "088380808080201a0f08fbffffffffffffffff0112026e6f";
  const answer = codec.decode(STREAM_RESPONSE, hex(bytes));
  assert.deepEqual(answer, {
    call_id: 2 ** 40 + 3,
    answer: "status",
    status: { code: -5, message: "no" },
    more: [], // a repeated field absent from the bytes decodes empty
  });
  assert.equal(codec.encode(STREAM_RESPONSE, answer).toString("hex"), bytes);
});

test("a waiting answer: its int64 expiry, and the members of the oneof not set are absent", () => {
  const bytes = "0807221a0a0272311208617070726f76616c1a036f6b3f20fbd095ffbc31";
  const answer = codec.decode(STREAM_RESPONSE, hex(bytes));
  assert.deepEqual(answer, {
    call_id: 7,
    answer: "waiting",
    waiting: { request_id: "r1", kind: "approval", summary: "ok?", expires_at_ms: 1_700_000_000_123 },
    more: [],
  });
  assert.ok(!("response" in answer) && !("status" in answer));
  assert.equal(codec.encode(STREAM_RESPONSE, answer).toString("hex"), bytes);
});

test("a negative int64 is ten bytes of two's complement, both ways", () => {
  const bytes = "2085afea80c3ceffffff01";
  const waiting = codec.decode("toolbridge.v1.CallWaiting", hex(bytes));
  assert.equal(waiting.expires_at_ms, -1_700_000_000_123);
  assert.equal(codec.encode("toolbridge.v1.CallWaiting", waiting).toString("hex"), bytes);
});

test("repeated messages keep their order; absent fields decode to their defaults", () => {
  const bytes = "0a070a016112027b7d0a030a0162";
  const listed = codec.decode("toolbridge.v1.ListToolsResponse", hex(bytes));
  assert.equal(listed.tools.length, 2);
  assert.deepEqual(
    listed.tools.map(({ name, definition_json }) => [name, definition_json.toString()]),
    [
      ["a", "{}"],
      ["b", ""],
    ],
  );
  assert.ok(Buffer.isBuffer(listed.tools[1].definition_json));
  assert.equal(codec.encode("toolbridge.v1.ListToolsResponse", listed).toString("hex"), bytes);
  assert.deepEqual(codec.decode("toolbridge.v1.ListToolsResponse", Buffer.alloc(0)), { tools: [] });
});

test("a oneof member holding its default is still written and read as set", () => {
  const bytes = "0a001a016b";
  const response = codec.decode("toolbridge.v1.CallToolResponse", hex(bytes));
  assert.equal(response.outcome, "result_json");
  assert.equal(response.result_json.length, 0);
  assert.equal(response.step_key, "k");
  assert.equal(response.replayed, false);
  assert.equal(codec.encode("toolbridge.v1.CallToolResponse", response).toString("hex"), bytes);
});

test("fields this contract does not know (from a newer daemon) are skipped, of every wire type", () => {
  const status = codec.decode("toolbridge.v1.CallStatus", hex("08032a0378797a30013d01020304390102030405060708"));
  assert.deepEqual(status, { code: 3, message: "" });
});

test("a truncated message is refused, not read past its end", () => {
  assert.throws(() => codec.decode(STREAM_RESPONSE, hex("0807221a0a02")), RangeError);
  assert.throws(() => codec.decode(STREAM_RESPONSE, hex("08ff")), RangeError);
});

test("a message the contract does not have is a TypeError naming it", () => {
  assert.throws(() => codec.encode("toolbridge.v1.Nope", {}), /no message toolbridge\.v1\.Nope/);
});
