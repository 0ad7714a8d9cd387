"use strict";
// The shared wire vectors (tests/vectors/wire.json), run against the Node client. The Python
// client runs the same file (tests/clients/test_wire_vectors.py).

const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const { describe, test } = require("node:test");

const { ToolError } = require("../index.js");
const proto = require("../lib/proto");
const {
  FORMATS,
  decodeDefinitions,
  decodeStreamAnswer,
  encodeArguments,
  streamRequest,
} = require("../lib/wire");

const VECTORS_FILE = path.join(__dirname, "..", "..", "..", "tests", "vectors", "wire.json");
const VECTORS = JSON.parse(fs.readFileSync(VECTORS_FILE, "utf8"));
const hex = (bytes) => Buffer.from(bytes).toString("hex");

// JavaScript has no keyword arguments: vectors with kwargs are the Python client's alone.
const NODE_CALLS = VECTORS.calls.filter((vector) => Object.keys(vector.kwargs).length === 0);

test("the vectors hold calls for Node", () => {
  assert.ok(NODE_CALLS.length >= 8, `${NODE_CALLS.length} calls for Node`);
});

describe("a call is these bytes on the wire", () => {
  for (const vector of NODE_CALLS) {
    test(vector.name, () => {
      const [positional, named] = encodeArguments(vector.args);
      assert.equal(positional.toString("utf8"), vector.positional_arguments_json);
      assert.equal(named.toString("utf8"), vector.named_arguments_json);
      const request = streamRequest(vector.call_id, vector.tool, positional, named, vector.traceparent ?? "");
      assert.equal(hex(proto.encode(proto.CallToolStreamRequestSchema, request)), vector.request_hex);
    });
  }
});

describe("an answer means this result or error", () => {
  for (const vector of VECTORS.answers) {
    test(vector.name, () => {
      const answer = proto.decode(proto.CallToolStreamResponseSchema, Buffer.from(vector.answer_hex, "hex"));
      assert.equal(answer.callId, BigInt(vector.answer.call_id));
      if ("error" in vector) {
        assert.throws(
          () => decodeStreamAnswer(answer),
          (error) => {
            assert.ok(error instanceof ToolError);
            assert.deepEqual(
              { type: error.type, message: error.message, retryable: error.retryable, error_id: error.errorId },
              vector.error,
            );
            return true;
          },
        );
      } else {
        assert.deepEqual(decodeStreamAnswer(answer), vector.result);
      }
    });
  }
});

describe("a definitions request is these bytes", () => {
  for (const vector of VECTORS.definitions) {
    test(vector.name, () => {
      const request = { format: FORMATS[vector.format] };
      assert.equal(hex(proto.encode(proto.ListToolsRequestSchema, request)), vector.request_hex);
    });
  }
});

describe("listed definitions decode to this list", () => {
  for (const vector of VECTORS.listed) {
    test(vector.name, () => {
      const response = proto.decode(proto.ListToolsResponseSchema, Buffer.from(vector.response_hex, "hex"));
      assert.deepEqual(decodeDefinitions(response), vector.definitions);
    });
  }
});
