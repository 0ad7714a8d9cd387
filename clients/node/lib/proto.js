"use strict";
// The one module that reads the contract: proto/toolbridge/v1/toolbridge.js, the table that
// scripts/gen_proto.py generates from the repository's proto/ (its --check fails on drift),
// encoded by lib/codec.js. Nothing is parsed at start: the table is plain static code.

const { Codec } = require("./codec");
const contract = require("../proto/toolbridge/v1/toolbridge.js");

const SERVICE = "toolbridge.v1.ToolBridgeService";

let definition;

/**
 * The package definition of the contract, built once: what `grpc.loadPackageDefinition`
 * takes (the tests' grpc-js fake daemon does; the client itself uses `methods()`). Decoded messages have proto-loader's shape with { keepCase, longs: Number,
 * enums: Number, defaults: true, oneofs: true } (see lib/codec.js).
 */
function packageDefinition() {
  definition ??= new Codec(contract).packageDefinition(contract);
  return definition;
}

/** The service's method definitions, each with its serializers: the bytes on the wire. */
function methods() {
  return packageDefinition()[SERVICE];
}

module.exports = { SERVICE, methods, packageDefinition };
