"use strict";
// What gRPC over HTTP/2 says (doc/PROTOCOL-HTTP2.md in grpc/grpc), as pure functions for
// lib/transport.js: addresses, length-prefixed messages, and the status a response, an HTTP
// status or an RST_STREAM means. Nothing here touches the network, so each rule is tested
// on bytes alone.

/** The gRPC status codes the transport produces or names. */
const Code = Object.freeze({
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
});

const CODE_NAMES = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
];

// The gRPC HTTP/2 spec's mapping of an HTTP status that is not 200 (no grpc-status with it).
const HTTP_STATUS_CODES = new Map([
  [400, Code.INTERNAL],
  [401, Code.UNAUTHENTICATED],
  [403, Code.PERMISSION_DENIED],
  [404, Code.UNIMPLEMENTED],
  [429, Code.UNAVAILABLE],
  [502, Code.UNAVAILABLE],
  [503, Code.UNAVAILABLE],
  [504, Code.UNAVAILABLE],
]);

// HTTP/2 error codes (RFC 9113, section 7) by number, for messages.
const H2_ERRORS = [
  "NO_ERROR",
  "PROTOCOL_ERROR",
  "INTERNAL_ERROR",
  "FLOW_CONTROL_ERROR",
  "SETTINGS_TIMEOUT",
  "STREAM_CLOSED",
  "FRAME_SIZE_ERROR",
  "REFUSED_STREAM",
  "CANCEL",
  "COMPRESSION_ERROR",
  "CONNECT_ERROR",
  "ENHANCE_YOUR_CALM",
  "INADEQUATE_SECURITY",
  "HTTP_1_1_REQUIRED",
];

// RST_STREAM from the peer, as the spec maps it (INTERNAL for the others).
const RST_CODES = new Map([
  [H2_ERRORS.indexOf("REFUSED_STREAM"), Code.UNAVAILABLE],
  [H2_ERRORS.indexOf("CANCEL"), Code.CANCELLED],
  [H2_ERRORS.indexOf("ENHANCE_YOUR_CALM"), Code.RESOURCE_EXHAUSTED],
]);

const PREFIX_BYTES = 5; // compressed flag, then the length as a 32-bit big-endian integer

/**
 * How a call ended; `type`, when set, is the ToolError type to fail with instead of the one
 * the code means (a TLS failure is not worth retrying, as UNAVAILABLE alone says).
 * @typedef {{ code: number, message: string, type?: string }} Status
 */

function status(code, message, type) {
  const ended = { code, message: message || CODE_NAMES[code] || `gRPC status ${code}` };
  if (type !== undefined) ended.type = type;
  return ended;
}

/**
 * Where an address points: `unix:/abs/path`, `unix:///abs/path`, `unix:relative/path` (from
 * the working directory), `host:port` or `[v6 address]:port`, and `tls://host:port` (what
 * `toolbridge serve` prints when it serves TLS); the forms the daemon hands out and grpc reads.
 * @returns {{ path: string, authority: string, tls: false } |
 *   { host: string, port: number, authority: string, tls: boolean }}
 * @throws {TypeError} for anything else, saying what is read.
 */
function parseAddress(address) {
  const expected = "expected unix:/path/to.sock, host:port or tls://host:port";
  if (address.startsWith("unix:")) {
    let path = address.slice("unix:".length);
    if (path.startsWith("//")) {
      path = path.slice(2); // unix://absolute_path: the authority part must be empty
      if (!path.startsWith("/")) throw new TypeError(`${JSON.stringify(address)}: unix:// takes an absolute path`);
    }
    if (path === "") throw new TypeError(`${JSON.stringify(address)} names no socket; ${expected}`);
    return { path, authority: "localhost", tls: false };
  }
  const tls = address.startsWith("tls://");
  const hostPort = tls ? address.slice("tls://".length) : address;
  const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]/\s]+)):(\d{1,5})$/.exec(hostPort);
  const port = match === null ? 0 : Number(match[3]);
  if (port < 1 || port > 65535) throw new TypeError(`${JSON.stringify(address)} is not an address; ${expected}`);
  return { host: match[1] ?? match[2], port, authority: hostPort, tls };
}

/** `bytes` as a gRPC message on the wire: uncompressed, its length before it. */
function frame(bytes) {
  const framed = Buffer.allocUnsafe(PREFIX_BYTES + bytes.length);
  framed[0] = 0;
  framed.writeUInt32BE(bytes.length, 1);
  bytes.copy(framed, PREFIX_BYTES);
  return framed;
}

/**
 * Length-prefixed messages out of DATA as it comes: a message may span chunks, a chunk may
 * hold several. A compressed message or one above `limit` is refused from its prefix, before
 * its bytes are held.
 */
class MessageReader {
  constructor(limit) {
    this.limit = limit;
    this.chunks = [];
    this.buffered = 0;
    /** The length of the message being read, or -1 while its prefix is not complete. */
    this.length = -1;
  }

  /**
   * @param {Buffer} chunk
   * @returns {{ messages: Buffer[], refusal: Status | null }} the messages it completes, and
   *   why the stream cannot go on (nothing after a refusal is read).
   */
  push(chunk) {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    const messages = [];
    for (;;) {
      if (this.length < 0) {
        if (this.buffered < PREFIX_BYTES) break;
        const prefix = this._take(PREFIX_BYTES);
        const length = prefix.readUInt32BE(1);
        if (prefix[0] !== 0) {
          const refusal = `the daemon sent a compressed message (flag ${prefix[0]}), and this client asked for none`;
          return { messages, refusal: status(Code.INTERNAL, refusal) };
        }
        if (length > this.limit) {
          const refusal = `the daemon sent a message of ${length} bytes, more than this client reads (${this.limit})`;
          return { messages, refusal: status(Code.RESOURCE_EXHAUSTED, refusal) };
        }
        this.length = length;
      }
      if (this.buffered < this.length) break;
      messages.push(this._take(this.length));
      this.length = -1;
    }
    return { messages, refusal: null };
  }

  _take(count) {
    if (count === 0) return Buffer.alloc(0);
    const first = this.chunks[0];
    let taken;
    if (first.length >= count) {
      taken = first.subarray(0, count);
      if (first.length === count) this.chunks.shift();
      else this.chunks[0] = first.subarray(count);
    } else {
      taken = Buffer.allocUnsafe(count);
      let at = 0;
      while (at < count) {
        const chunk = this.chunks[0];
        const part = Math.min(chunk.length, count - at);
        chunk.copy(taken, at, 0, part);
        at += part;
        if (part === chunk.length) this.chunks.shift();
        else this.chunks[0] = chunk.subarray(part);
      }
    }
    this.buffered -= count;
    return taken;
  }
}

/** grpc-message is percent-encoded UTF-8; a malformed escape is left as it is. */
function percentDecoded(text) {
  if (!text.includes("%")) return text;
  return text.replace(/(?:%[0-9A-Fa-f]{2})+/g, (run) => Buffer.from(run.replace(/%/g, ""), "hex").toString("utf8"));
}

function headerValue(headers, name) {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The status grpc-status and grpc-message carry, or null without grpc-status. */
function grpcStatus(headers) {
  const code = headerValue(headers, "grpc-status");
  if (code === undefined) return null;
  const number = /^\d+$/.test(code) ? Number(code) : NaN;
  const message = percentDecoded(headerValue(headers, "grpc-message") ?? "");
  if (!Number.isSafeInteger(number)) return status(Code.UNKNOWN, `the daemon sent grpc-status ${JSON.stringify(code)}`);
  return status(number, message);
}

/** The status a response with HTTP status `httpStatus` (not 200) and no grpc-status means. */
function httpStatus(httpStatusCode) {
  const code = HTTP_STATUS_CODES.get(httpStatusCode) ?? Code.UNKNOWN;
  return status(code, `the daemon answered with HTTP status ${httpStatusCode}`);
}

/** An HTTP/2 error code's name, for messages. */
function h2ErrorName(code) {
  return H2_ERRORS[code] ?? `code ${code}`;
}

/** The status a call reset by the daemon (RST_STREAM `code`) before any status ends with. */
function resetStatus(code) {
  if (code === 0 || code === undefined) return status(Code.INTERNAL, "the daemon closed the call without a status");
  return status(RST_CODES.get(code) ?? Code.INTERNAL, `the daemon reset the call (RST_STREAM ${h2ErrorName(code)})`);
}

module.exports = {
  Code,
  MessageReader,
  frame,
  grpcStatus,
  h2ErrorName,
  headerValue,
  httpStatus,
  parseAddress,
  percentDecoded,
  resetStatus,
  status,
};
