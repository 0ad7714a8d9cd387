"use strict";
// The one module that reads the contract: proto/toolbridge/v1/toolbridge.proto, a copy of the
// repository's proto/ kept identical by scripts/gen_proto.py (whose --check fails on drift).

const path = require("node:path");
const protoLoader = require("@grpc/proto-loader");

const PROTO_FILE = path.join(__dirname, "..", "proto", "toolbridge", "v1", "toolbridge.proto");
const SERVICE = "toolbridge.v1.ToolBridgeService";

// keepCase: field names as in the .proto (snake_case), like the Python messages.
// longs: Number: call ids are counters far below 2**53.
// oneofs: a virtual field names the member set ("outcome", "answer").
const LOADER_OPTIONS = { keepCase: true, longs: Number, enums: Number, defaults: true, oneofs: true };

let definition;

/** The package definition of the contract, loaded once. */
function packageDefinition() {
  definition ??= protoLoader.loadSync(PROTO_FILE, LOADER_OPTIONS);
  return definition;
}

/** The service's method definitions, each with its serializers: the bytes on the wire. */
function methods() {
  return packageDefinition()[SERVICE];
}

module.exports = { methods, packageDefinition, PROTO_FILE };
