"use strict";
// Protocol Buffers encoding for the contract's messages, driven by the generated table in
// proto/toolbridge/v1/toolbridge.js (scripts/gen_proto.py writes it from the .proto).
//
// Why not protobufjs and @grpc/proto-loader: loading them and parsing the .proto cost a
// sandboxed command more CPU than the rest of its first tool call (about 100 ms of ~250 ms
// on the reference machine). The contract uses a handful of field types; the generator
// refuses any other, so this file grows only when the contract does.
//
// Decoded messages have the shape proto-loader gave with { keepCase, longs: Number,
// enums: Number, defaults: true, oneofs: true }: field names as in the .proto, every field
// not in a oneof present (its default when absent: "", 0, false, an empty Buffer, null for a
// message, [] for a repeated field), a set oneof member present and the oneof's own name
// holding which member is set. Encoding writes fields in number order and leaves out a
// proto3 default (a oneof member is always written when set): the canonical bytes Python
// writes, which tests/vectors/wire.json pins.

const VARINT = 0;
const FIXED64 = 1;
const LENGTH_DELIMITED = 2;
const FIXED32 = 5;
const TWO_32 = 2 ** 32;
const EMPTY = Buffer.alloc(0);

class Writer {
  constructor() {
    this.chunks = [];
    this.bytes = [];
  }

  varint(value) {
    // Non-negative integers up to 2**53 exactly; the contract's counters stay far below.
    let rest = value;
    while (rest >= 0x80) {
      this.bytes.push((rest % 0x80) | 0x80);
      rest = Math.floor(rest / 0x80);
    }
    this.bytes.push(rest);
  }

  signed(value) {
    if (value >= 0) return this.varint(value);
    // A negative int32/int64 is its 64-bit two's complement: ten bytes.
    let rest = BigInt.asUintN(64, BigInt(value));
    while (rest >= 0x80n) {
      this.bytes.push(Number(rest & 0x7fn) | 0x80);
      rest >>= 7n;
    }
    this.bytes.push(Number(rest));
  }

  tag(number, wireType) {
    this.varint(number * 8 + wireType);
  }

  raw(buffer) {
    this.varint(buffer.length);
    this.append(buffer);
  }

  /** Bytes already encoded, as they are (no length before them). */
  append(buffer) {
    this.flush();
    this.chunks.push(buffer);
  }

  flush() {
    if (this.bytes.length > 0) {
      this.chunks.push(Buffer.from(this.bytes));
      this.bytes = [];
    }
  }

  finish() {
    this.flush();
    return this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks);
  }
}

class Reader {
  constructor(buffer) {
    this.buffer = buffer;
    this.at = 0;
  }

  done() {
    return this.at >= this.buffer.length;
  }

  byte() {
    if (this.at >= this.buffer.length) throw new RangeError("truncated message");
    return this.buffer[this.at++];
  }

  /** A varint as its low and high 32 bits (unsigned). */
  varint64() {
    let low = 0;
    let high = 0;
    for (let shift = 0; shift < 64; shift += 7) {
      const byte = this.byte();
      const bits = byte & 0x7f;
      if (shift < 28) low += bits * 2 ** shift;
      else if (shift === 28) {
        low += (bits & 0x0f) * 2 ** 28;
        high += bits >>> 4;
      } else high += bits * 2 ** (shift - 32);
      if (byte < 0x80) return [low >>> 0, high >>> 0];
    }
    throw new RangeError("varint longer than 64 bits");
  }

  unsigned() {
    const [low, high] = this.varint64();
    return high * TWO_32 + low;
  }

  int64() {
    const [low, high] = this.varint64();
    return high >= 0x80000000 ? -((TWO_32 - 1 - high) * TWO_32 + (TWO_32 - low)) : high * TWO_32 + low;
  }

  int32() {
    return this.varint64()[0] | 0;
  }

  bytes() {
    const length = this.unsigned();
    const end = this.at + length;
    if (end > this.buffer.length) throw new RangeError("truncated message");
    const slice = this.buffer.subarray(this.at, end);
    this.at = end;
    return slice;
  }

  skip(wireType) {
    if (wireType === VARINT) this.varint64();
    else if (wireType === FIXED64) this.at += 8;
    else if (wireType === LENGTH_DELIMITED) this.bytes();
    else if (wireType === FIXED32) this.at += 4;
    else throw new RangeError(`unsupported wire type ${wireType}`);
    if (this.at > this.buffer.length) throw new RangeError("truncated message");
  }
}

const DEFAULTS = { string: "", int32: 0, int64: 0, uint64: 0, enum: 0, bool: false };

function defaultOf(field) {
  if (field.repeated) return [];
  if (field.type === "message") return null;
  if (field.type === "bytes") return EMPTY;
  return DEFAULTS[field.type];
}

function isDefault(field, value) {
  if (value === undefined || value === null) return true;
  if (field.oneof !== undefined) return false; // a set oneof member is written, even "" or 0
  if (field.type === "bytes" || field.type === "string") return value.length === 0;
  if (field.type === "bool") return value === false;
  return Number(value) === 0;
}

/** Encoders and decoders for every message of a generated contract table. */
class Codec {
  constructor(contract) {
    this.messages = new Map();
    for (const [name, fields] of Object.entries(contract.messages)) {
      const sorted = [...fields].sort((a, b) => a.number - b.number);
      this.messages.set(name, { fields: sorted, byNumber: new Map(sorted.map((field) => [field.number, field])) });
    }
  }

  _message(name) {
    const message = this.messages.get(name);
    if (message === undefined) throw new TypeError(`no message ${name} in the contract`);
    return message;
  }

  /** @returns {Buffer} the message `name` holding `object`'s fields. */
  encode(name, object) {
    const writer = new Writer();
    this._write(writer, this._message(name), object ?? {});
    return writer.finish();
  }

  _write(writer, message, object) {
    for (const field of message.fields) {
      const value = object[field.name];
      if (field.repeated) {
        for (const item of value ?? []) this._writeValue(writer, field, item);
      } else if (!isDefault(field, value)) {
        this._writeValue(writer, field, value);
      }
    }
  }

  _writeValue(writer, field, value) {
    switch (field.type) {
      case "string":
        writer.tag(field.number, LENGTH_DELIMITED);
        writer.raw(Buffer.from(String(value), "utf8"));
        break;
      case "bytes":
        writer.tag(field.number, LENGTH_DELIMITED);
        writer.raw(Buffer.isBuffer(value) ? value : Buffer.from(value));
        break;
      case "message":
        writer.tag(field.number, LENGTH_DELIMITED);
        writer.raw(this.encode(field.message, value));
        break;
      case "bool":
        writer.tag(field.number, VARINT);
        writer.varint(value ? 1 : 0);
        break;
      case "uint64":
        writer.tag(field.number, VARINT);
        writer.varint(Number(value));
        break;
      default: // int32, int64, enum
        writer.tag(field.number, VARINT);
        writer.signed(Number(value));
    }
  }

  /** @returns {object} the message `name` read from `buffer`. */
  decode(name, buffer) {
    return this._read(new Reader(buffer), this._message(name));
  }

  _read(reader, message) {
    const object = {};
    for (const field of message.fields) {
      if (field.oneof === undefined) object[field.name] = defaultOf(field);
    }
    while (!reader.done()) {
      const key = reader.unsigned();
      const number = Math.floor(key / 8);
      const wireType = key % 8;
      const field = message.byNumber.get(number);
      if (field === undefined || wireType !== (WIRE_TYPES[field.type] ?? VARINT)) {
        reader.skip(wireType); // a field this contract does not know: from a newer daemon
        continue;
      }
      const value = this._readValue(reader, field);
      // A singular field seen twice: the last wins (proto would merge two messages; the
      // daemon never sends one twice).
      if (field.repeated) object[field.name].push(value);
      else object[field.name] = value;
      if (field.oneof !== undefined) {
        const previous = object[field.oneof];
        if (previous !== undefined && previous !== field.name) delete object[previous];
        object[field.oneof] = field.name;
      }
    }
    return object;
  }

  _readValue(reader, field) {
    switch (field.type) {
      case "string":
        return reader.bytes().toString("utf8");
      case "bytes":
        return Buffer.from(reader.bytes()); // a copy: the frame's buffer is reused
      case "message":
        return this._read(new Reader(reader.bytes()), this._message(field.message));
      case "bool":
        return reader.unsigned() !== 0;
      case "uint64":
        return reader.unsigned();
      case "int64":
        return reader.int64();
      default: // int32, enum
        return reader.int32();
    }
  }

  /**
   * The services as grpc-js takes them (`grpc.loadPackageDefinition`): full service name ->
   * method name -> its path, streaming flags and serializers.
   */
  packageDefinition(contract) {
    const definition = {};
    for (const [serviceName, methods] of Object.entries(contract.services)) {
      const service = {};
      for (const [methodName, method] of Object.entries(methods)) {
        service[methodName] = {
          path: method.path,
          originalName: methodName,
          requestStream: method.requestStream,
          responseStream: method.responseStream,
          requestSerialize: (object) => this.encode(method.request, object),
          requestDeserialize: (buffer) => this.decode(method.request, buffer),
          responseSerialize: (object) => this.encode(method.response, object),
          responseDeserialize: (buffer) => this.decode(method.response, buffer),
        };
      }
      definition[serviceName] = service;
    }
    return definition;
  }
}

const WIRE_TYPES = { string: LENGTH_DELIMITED, bytes: LENGTH_DELIMITED, message: LENGTH_DELIMITED };

module.exports = { Codec, LENGTH_DELIMITED, Writer };
