"use strict";
// gRPC over HTTP/2, with node:http2 alone, for the two calls this client makes: the bidi
// CallToolStream and the unary ListTools.
//
// Why not @grpc/grpc-js: loading it and making its first call cost a sandboxed command about
// 64 ms of the ~150 ms a one-call command takes; node:http2 does the same call in about 7 ms.
// The client needs little of gRPC: no TLS, no name resolution beyond net.connect, no
// deadlines, no compression, no retries, one connection. What it does need is here, as the
// gRPC over HTTP/2 spec (doc/PROTOCOL-HTTP2.md in grpc/grpc) says it: length-prefixed
// messages, the status in trailers (or in the headers of a trailers-only response), the
// HTTP status and RST_STREAM codes mapped to gRPC codes, GOAWAY honoured.
//
// A call is kept alive (its session ref'd) until its owner says it may be left (`unref`):
// the stream's owner knows whether a tool call is in flight on it, HTTP/2 does not. A session
// with no ref'd call never keeps the process alive.

const http2 = require("node:http2");
const net = require("node:net");

/** The gRPC status codes this module produces or names. */
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

const { NGHTTP2_NO_ERROR, NGHTTP2_REFUSED_STREAM, NGHTTP2_CANCEL, NGHTTP2_ENHANCE_YOUR_CALM } = http2.constants;

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

// RST_STREAM from the peer, as the spec maps it.
const RST_CODES = new Map([
  [NGHTTP2_REFUSED_STREAM, Code.UNAVAILABLE],
  [NGHTTP2_CANCEL, Code.CANCELLED],
  [NGHTTP2_ENHANCE_YOUR_CALM, Code.RESOURCE_EXHAUSTED],
]);

const PREFIX_BYTES = 5; // compressed flag, then the length as a 32-bit big-endian integer

/** @typedef {{ code: number, message: string }} Status */

function status(code, message) {
  return { code, message: message || CODE_NAMES[code] || `gRPC status ${code}` };
}

/**
 * Where an address points: `unix:/abs/path`, `unix:///abs/path`, `unix:relative/path` (from
 * the working directory), `host:port` or `[v6 address]:port`; the forms the daemon hands out
 * and grpc reads.
 * @returns {{ path: string, authority: string } | { host: string, port: number, authority: string }}
 * @throws {TypeError} for anything else, saying what is read.
 */
function parseAddress(address) {
  const expected = "expected unix:/path/to.sock or host:port";
  if (address.startsWith("unix:")) {
    let path = address.slice("unix:".length);
    if (path.startsWith("//")) {
      path = path.slice(2); // unix://absolute_path: the authority part must be empty
      if (!path.startsWith("/")) throw new TypeError(`${JSON.stringify(address)}: unix:// takes an absolute path`);
    }
    if (path === "") throw new TypeError(`${JSON.stringify(address)} names no socket; ${expected}`);
    return { path, authority: "localhost" };
  }
  const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]/\s]+)):(\d{1,5})$/.exec(address);
  const port = match === null ? 0 : Number(match[3]);
  if (port < 1 || port > 65535) throw new TypeError(`${JSON.stringify(address)} is not an address; ${expected}`);
  return { host: match[1] ?? match[2], port, authority: address };
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

/**
 * One RPC on a session. Its owner's handlers hear, in order: `onHeaders(headers)` (the
 * response's metadata), `onMessage(decoded)` for each message, and `onStatus(status)` once,
 * last, whatever ends it. `onDraining()` says the session is going away: the call may finish,
 * but new work belongs on a new session.
 */
class Call {
  constructor(session, handlers) {
    this.session = session;
    this.handlers = handlers;
    this.reader = new MessageReader(session.channel.maxMessageBytes);
    this.stream = null;
    this.finished = false;
    this.referenced = false;
    /** The status the response has given (trailers, or a trailers-only response), kept for its end. */
    this.received = null;
    /** DATA that came before the response headers were handled: read after them. */
    this.early = [];
    this.headersSeen = false;
    this.error = null;
  }

  _start(path, metadata) {
    const headers = {
      ":method": "POST",
      ":path": path,
      "content-type": "application/grpc",
      te: "trailers",
      ...metadata,
    };
    try {
      this.stream = this.session.h2.request(headers);
    } catch (error) {
      // A session closing under us, or metadata HTTP/2 cannot carry: told as a status, later,
      // like every other end.
      process.nextTick(() => this._finish(status(Code.UNAVAILABLE, `cannot start the call: ${error.message}`)));
      return;
    }
    const { stream } = this;
    stream.on("response", (responseHeaders) => this._response(responseHeaders));
    stream.on("data", (chunk) => {
      if (this.headersSeen) this._data(chunk);
      else this.early.push(chunk);
    });
    stream.on("trailers", (trailers) => {
      this.received ??= grpcStatus(trailers) ?? status(Code.INTERNAL, "the daemon's trailers carry no grpc-status");
    });
    stream.on("end", () => {
      this._finish(this.received ?? status(Code.INTERNAL, "the daemon ended the call without a status"));
    });
    stream.on("error", (error) => {
      this.error = error;
    });
    stream.on("close", () => this._closed());
  }

  _response(headers) {
    if (this.finished) return;
    this.headersSeen = true;
    const httpStatus = Number(headers[":status"]);
    const carried = grpcStatus(headers);
    if (carried !== null) {
      this.received = carried; // trailers-only: the status, and nothing else, is coming
    } else if (httpStatus !== 200) {
      const code = HTTP_STATUS_CODES.get(httpStatus) ?? Code.UNKNOWN;
      this._finish(status(code, `the daemon answered with HTTP status ${httpStatus}`), NGHTTP2_CANCEL);
      return;
    } else {
      const type = headerValue(headers, "content-type") ?? "";
      if (!type.startsWith("application/grpc")) {
        this._finish(status(Code.UNKNOWN, `the daemon answered with content-type ${JSON.stringify(type)}`), NGHTTP2_CANCEL);
        return;
      }
      this.handlers.onHeaders?.(headers);
    }
    for (const chunk of this.early.splice(0)) this._data(chunk);
  }

  _data(chunk) {
    if (this.finished) return;
    const { messages, refusal } = this.reader.push(chunk);
    for (const message of messages) {
      let decoded;
      try {
        decoded = this.handlers.decode(message);
      } catch (error) {
        this._finish(status(Code.INTERNAL, `cannot decode the daemon's message: ${error.message}`), NGHTTP2_CANCEL);
        return;
      }
      this.handlers.onMessage(decoded);
      if (this.finished) return; // the owner cancelled it
    }
    if (refusal !== null) this._finish(refusal, NGHTTP2_CANCEL);
  }

  _closed() {
    if (this.finished) return;
    const code = this.stream.rstCode;
    if (this.received !== null) {
      this._finish(this.received); // the daemon had said how the call ended
    } else if (this.session.failure !== null) {
      this._finish(this.session.failure);
    } else if (code === NGHTTP2_NO_ERROR || code === undefined) {
      this._finish(status(Code.INTERNAL, "the daemon closed the call without a status"));
    } else {
      const name = H2_ERRORS[code] ?? `code ${code}`;
      this._finish(status(RST_CODES.get(code) ?? Code.INTERNAL, `the daemon reset the call (RST_STREAM ${name})`));
    }
  }

  /**
   * Send one message; `done` is called once it is handed to the connection (or the call has
   * ended: nothing more goes out then).
   */
  write(bytes, done) {
    if (this.finished || this.stream === null) {
      process.nextTick(done);
      return;
    }
    this.stream.write(frame(bytes), () => done());
  }

  /** Half-close: no more messages from this side; the answers and the status still come. */
  end(bytes) {
    if (this.finished || this.stream === null) return;
    if (bytes === undefined) this.stream.end();
    else this.stream.end(frame(bytes));
  }

  /** End the call from this side: its status is CANCELLED, told to `onStatus` like any other. */
  cancel() {
    this._finish(status(Code.CANCELLED, "cancelled by the client"), NGHTTP2_CANCEL);
  }

  /** Keep the process alive while this call is open (the default for a new call). */
  ref() {
    if (!this.referenced && !this.finished) {
      this.referenced = true;
      this.session.referenced(1);
    }
  }

  /** Let the process exit with this call open. */
  unref() {
    if (this.referenced) {
      this.referenced = false;
      this.session.referenced(-1);
    }
  }

  _finish(ended, rstCode = NGHTTP2_NO_ERROR) {
    if (this.finished) return;
    this.unref();
    this.finished = true;
    this.session.calls.delete(this);
    const { stream } = this;
    if (stream !== null && !stream.closed && !stream.destroyed) stream.close(rstCode);
    this.handlers.onStatus(ended);
  }
}

/** One HTTP/2 connection to the daemon and the calls on it. */
class Session {
  constructor(channel) {
    this.channel = channel;
    this.calls = new Set();
    this.references = 0;
    /** Why the connection failed or closed (UNAVAILABLE), once it has. */
    this.failure = null;
    this.draining = false;
    const target = channel.target;
    const url = target.path === undefined ? `http://${target.authority}` : "http://localhost";
    this.h2 = http2.connect(url, { createConnection: () => this._connect(target) });
    this.h2.on("goaway", (code) => this._drain(code));
    // The calls hear of it through their streams; the listener keeps it from being thrown.
    this.h2.on("error", (error) => {
      this.failure ??= this.failed(error);
    });
    this.h2.on("close", () => {
      this.failure ??= this.failed(null);
      channel.forget(this);
    });
    this.h2.unref();
  }

  _connect(target) {
    const socket = target.path === undefined ? net.connect(target.port, target.host) : net.connect(target.path);
    // Before the session's own listeners (it adds them once this returns): the calls the
    // socket's end closes then know that the connection, not the daemon, ended them.
    socket.on("error", (error) => {
      this.failure ??= this.failed(error);
    });
    socket.on("close", () => {
      this.failure ??= this.failed(null);
    });
    return socket;
  }

  failed(error) {
    const address = this.channel.address;
    const reason = error === null ? "the connection to the daemon closed" : `cannot reach the daemon at ${address}: ${error.message}`;
    return status(Code.UNAVAILABLE, reason);
  }

  usable() {
    return !this.draining && this.failure === null && !this.h2.closed && !this.h2.destroyed;
  }

  call(path, metadata, handlers) {
    const call = new Call(this, handlers);
    this.calls.add(call);
    call._start(path, metadata);
    call.ref();
    return call;
  }

  referenced(delta) {
    const before = this.references;
    this.references += delta;
    if (before === 0 && this.references > 0) this.h2.ref();
    else if (before > 0 && this.references === 0) this.h2.unref();
  }

  _drain(code) {
    // GOAWAY: with NO_ERROR node:http2 lets the calls already open finish and starts none on
    // this session; with an error it destroys the session, and the calls end UNAVAILABLE.
    if (code !== NGHTTP2_NO_ERROR) {
      const name = H2_ERRORS[code] ?? `code ${code}`;
      this.failure ??= status(Code.UNAVAILABLE, `the daemon closed the connection (GOAWAY ${name})`);
    }
    if (this.draining) return;
    this.draining = true;
    this.channel.forget(this);
    for (const call of [...this.calls]) call.handlers.onDraining?.();
  }
}

/** The calls of one client to one address, over one session at a time (a new one after GOAWAY). */
class Channel {
  /**
   * @param {string} address see `parseAddress`.
   * @param {{ maxMessageBytes: number }} options the largest message read.
   * @throws {TypeError} for an address this module does not read.
   */
  constructor(address, { maxMessageBytes }) {
    this.address = address;
    this.target = parseAddress(address);
    this.maxMessageBytes = maxMessageBytes;
    /** @type {Session | null} the session new calls go on. */
    this.current = null;
    /** Every session not yet closed, the current one and those finishing their calls. */
    this.sessions = new Set();
  }

  /**
   * Start a call of `path` (`/package.Service/Method`) with `metadata` as its headers.
   * @param {{ decode: (bytes: Buffer) => object, onMessage: (message: object) => void,
   *   onStatus: (status: Status) => void, onHeaders?: (headers: object) => void,
   *   onDraining?: () => void }} handlers
   * @returns {Call}
   */
  call(path, metadata, handlers) {
    if (this.current === null || !this.current.usable()) {
      if (this.current !== null) this.forget(this.current);
      this.current = new Session(this);
      this.sessions.add(this.current);
    }
    return this.current.call(path, metadata, handlers);
  }

  /**
   * A unary call: `callback(status, response)` once, with the one decoded response when the
   * status is OK.
   */
  unary(path, metadata, bytes, decode, callback) {
    let response = null;
    let count = 0;
    const call = this.call(path, metadata, {
      decode,
      onMessage: (message) => {
        response = message;
        count += 1;
      },
      onStatus: (ended) => {
        if (ended.code !== Code.OK) callback(ended, null);
        else if (count !== 1) callback(status(Code.INTERNAL, `the daemon answered a unary call with ${count} messages`), null);
        else callback(ended, response);
      },
    });
    call.end(bytes);
  }

  forget(session) {
    if (this.current === session) this.current = null;
    if (session.h2.destroyed) this.sessions.delete(session);
  }

  /** Close every session now: calls still open end with UNAVAILABLE. */
  close() {
    this.current = null;
    for (const session of this.sessions) {
      session.failure ??= status(Code.UNAVAILABLE, "the connection to the daemon closed");
      session.h2.destroy();
    }
    this.sessions.clear();
  }
}

module.exports = { Channel, Code, MessageReader, frame, parseAddress, percentDecoded };
