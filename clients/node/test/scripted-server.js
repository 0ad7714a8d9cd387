"use strict";
// A bare node:http2 server on a Unix socket whose every frame a test scripts: what no gRPC
// server library sends on purpose (a message split across DATA frames or several in one,
// a trailers-only response, an HTTP error, RST_STREAM codes, GOAWAY, a message above the
// client's limit, a compressed flag), for lib/transport.js. test/fake-daemon.js is the
// well-behaved counterpart, a real grpc-js server.

const fs = require("node:fs");
const http2 = require("node:http2");
const os = require("node:os");
const path = require("node:path");
const { EventEmitter, once } = require("node:events");
const proto = require("../lib/proto");

const OK_HEADERS = { ":status": 200, "content-type": "application/grpc" };

/** `bytes` framed as a gRPC message: `flag`, its length (32-bit big-endian), the bytes. */
function grpcMessage(bytes, flag = 0) {
  const prefix = Buffer.alloc(5);
  prefix[0] = flag;
  prefix.writeUInt32BE(bytes.length, 1);
  return Buffer.concat([prefix, bytes]);
}

/** Resolves once `stream.write(bytes)` has been handed on: the next write makes another frame. */
function written(stream, bytes) {
  return new Promise((resolve, reject) => stream.write(bytes, (error) => (error ? reject(error) : resolve())));
}

/** The gRPC messages a request stream carries, each passed to `onMessage` as it completes. */
function readMessages(stream, onMessage) {
  let buffered = Buffer.alloc(0);
  stream.on("data", (chunk) => {
    buffered = Buffer.concat([buffered, chunk]);
    while (buffered.length >= 5 && buffered.length >= 5 + buffered.readUInt32BE(1)) {
      const end = 5 + buffered.readUInt32BE(1);
      onMessage(buffered.subarray(5, end));
      buffered = buffered.subarray(end);
    }
  });
}

/**
 * Serve CallToolStream calls on `stream` the simple way: `answer(request, reply)` for each
 * call received (batched ones included), `reply(response)` sending one CallToolStreamResponse.
 */
function serveCalls(stream, answer, headers = {}) {
  stream.respond({ ...OK_HEADERS, ...headers }, { waitForTrailers: true });
  stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
  const reply = (response) => {
    if (!stream.destroyed && !stream.closed) {
      stream.write(grpcMessage(proto.encode(proto.CallToolStreamResponseSchema, response)));
    }
  };
  readMessages(stream, (bytes) => {
    const request = proto.decode(proto.CallToolStreamRequestSchema, bytes);
    for (const call of [request, ...request.more]) answer(call, reply);
  });
  stream.on("end", () => {
    if (!stream.destroyed && !stream.closed) stream.end(); // the client half-closed: so does the server
  });
}

/** The path of the call stream, the RPC the transport tests open. */
const CALL_STREAM_PATH = proto.PATHS.CallToolStream;

/**
 * One call of the call stream on `channel` (a lib/transport.js Channel): `write` as its one
 * message and half-closed (left open with `end: false`). Resolves with how it ended: its
 * status, the messages read (bytes) and the response headers.
 */
function callOn(channel, { metadata = {}, write = null, end = true } = {}) {
  return new Promise((resolve) => {
    const messages = [];
    let headers = null;
    const call = channel.call(CALL_STREAM_PATH, metadata, {
      decode: (bytes) => Buffer.from(bytes),
      onHeaders: (received) => {
        headers = received;
      },
      onMessage: (message) => messages.push(message),
      onStatus: (status) => resolve({ status, messages, headers }),
    });
    if (!end) return;
    if (write === null) call.end();
    else call.end(write);
  });
}

/** A result answering `call`: the JSON of `value`. */
function result(call, value) {
  const outcome = { case: "resultJson", value: Buffer.from(JSON.stringify(value)) };
  return { callId: call.callId, answer: { case: "response", value: { outcome } } };
}

class ScriptedServer extends EventEmitter {
  /**
   * @param {(stream: http2.ServerHttp2Stream, headers: object, server: ScriptedServer) => void} handler
   *   scripts each stream the client opens; it may be replaced (`server.handler = ...`) between tests.
   * @param {http2.ServerOptions} [options] for node:http2's server: its settings, its padding.
   */
  constructor(handler = () => {}, options = {}) {
    super();
    this.handler = handler;
    /** Every session (connection) the client opened, in order. */
    this.sessions = [];
    /** The request headers of every stream, in order. */
    this.requests = [];
    this._server = http2.createServer(options);
    this._server.on("session", (session) => {
      session.on("error", () => {});
      this.sessions.push(session);
      this.emit("session", session);
    });
    this._server.on("stream", (stream, headers) => {
      stream.on("error", () => {});
      this.requests.push(headers);
      this.handler(stream, headers, this);
    });
  }

  async start() {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), "inngest-tools-h2-"));
    this.socket = path.join(this.dir, "scripted.sock");
    this.address = `unix:${this.socket}`;
    this._server.listen(this.socket);
    await once(this._server, "listening");
    return this.address;
  }

  /** Drop every connection and take no more (a daemon gone: connecting fails) until `reachable`. */
  async unreachable() {
    const closed = new Promise((resolve) => this._server.close(resolve));
    for (const session of this.sessions) session.destroy();
    await closed;
  }

  /** Take connections again, at the same address. */
  async reachable() {
    this._server.listen(this.socket);
    await once(this._server, "listening");
  }

  stop() {
    for (const session of this.sessions) session.destroy();
    this._server.close();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  /** Wait for an event, failing after `ms` instead of hanging the test run. */
  next(event, ms = 5000) {
    return once(this, event, { signal: AbortSignal.timeout(ms) });
  }
}

module.exports = {
  CALL_STREAM_PATH,
  OK_HEADERS,
  ScriptedServer,
  callOn,
  grpcMessage,
  readMessages,
  result,
  serveCalls,
  written,
};
