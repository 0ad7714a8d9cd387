"use strict";
// The one module that reads the contract: the messages protobuf-es generated from proto/
// (proto/toolbridge/v1/toolbridge_pb.js, written by scripts/gen_proto.py, whose --check fails
// on drift), encoded and decoded by @bufbuild/protobuf. Loaded with the connection, at a
// command's first call, never by `require("inngest_tools")` alone.
//
// Messages have protobuf-es's shape: camelCase fields, 64-bit integers as BigInt, a oneof as
// `{ case, value }`, bytes as Uint8Array. Encoding writes fields in number order and leaves a
// proto3 default out: the canonical bytes Python writes, which tests/vectors/wire.json pins.
//
// Why not `require("@bufbuild/protobuf")`: its index loads every well-known type (about 60
// modules, each booting its descriptor) where the client needs `create`, `toBinary`,
// `fromBinary` and the binary writer; that was ~25 ms more for a sandboxed command's first
// call. They are taken from their own modules of the same package (the version is pinned
// exactly in package.json, and test/proto.test.js fails if the files move).

const path = require("node:path");
const contract = require("../proto/toolbridge/v1/toolbridge_pb.js");

const RUNTIME = path.join(path.dirname(require.resolve("@bufbuild/protobuf/codegenv2")), "..");
const { create } = require(path.join(RUNTIME, "create.js"));
const { toBinary } = require(path.join(RUNTIME, "to-binary.js"));
const { fromBinary } = require(path.join(RUNTIME, "from-binary.js"));
const { BinaryWriter, WireType } = require(path.join(RUNTIME, "wire", "binary-encoding.js"));

const {
  CallToolStreamRequestSchema,
  CallToolStreamResponseSchema,
  ListToolsRequestSchema,
  ListToolsResponseSchema,
  ToolBridgeService,
} = contract;

/** `/package.Service/Method` of a method of the service: what gRPC puts in `:path`. */
function methodPath(method) {
  return `/${ToolBridgeService.typeName}/${method.name}`;
}

const PATHS = Object.freeze({
  CallToolStream: methodPath(ToolBridgeService.method.callToolStream),
  ListTools: methodPath(ToolBridgeService.method.listTools),
});

/** `bytes` (a Uint8Array) as a Buffer over the same memory. */
function asBuffer(bytes) {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** The bytes of a message of `schema` made from `init` (a plain object of its fields). */
function encode(schema, init) {
  return asBuffer(toBinary(schema, create(schema, init)));
}

/** The message of `schema` that `bytes` hold. @throws {Error} when they do not hold one. */
function decode(schema, bytes) {
  return fromBinary(schema, bytes);
}

// CallToolStreamRequest.more: its field number, from the generated descriptor.
const MORE_FIELD = CallToolStreamRequestSchema.field.more.number;
const MORE_TAG_BYTES = new BinaryWriter().tag(MORE_FIELD, WireType.LengthDelimited).finish().length;

function varintLength(value) {
  let length = 1;
  for (let rest = value; rest >= 0x80; rest = Math.floor(rest / 0x80)) length += 1;
  return length;
}

/**
 * What an encoded call of `length` bytes adds to a batch when it rides in another's `more`:
 * itself, its field tag and its length.
 */
function batchEntryBytes(length) {
  return MORE_TAG_BYTES + varintLength(length) + length;
}

/**
 * One CallToolStreamRequest carrying several encoded calls: the first in its own fields, the
 * rest in `more`. `more` is the last field, so appending its entries to the first call's
 * bytes is the canonical encoding (the bytes the Python client's batch is).
 * @param {Buffer[]} encoded each an encoded CallToolStreamRequest with no `more` of its own.
 * @returns {Buffer}
 */
function batchMessage(encoded) {
  if (encoded.length === 1) return encoded[0];
  const writer = new BinaryWriter().raw(encoded[0]);
  for (let index = 1; index < encoded.length; index += 1) {
    writer.tag(MORE_FIELD, WireType.LengthDelimited).bytes(encoded[index]);
  }
  return asBuffer(writer.finish());
}

module.exports = {
  CallToolStreamRequestSchema,
  CallToolStreamResponseSchema,
  ListToolsRequestSchema,
  ListToolsResponseSchema,
  PATHS,
  ToolBridgeService,
  batchEntryBytes,
  batchMessage,
  create,
  decode,
  encode,
};
