"use strict";
// gRPC over one HTTP/2 connection, for the two calls this client makes: the bidi
// CallToolStream and the unary ListTools. The one module that opens a socket.
//
// Why neither @grpc/grpc-js nor node:http2: loading grpc-js and making its first call cost a
// sandboxed command about 64 ms of the ~150 ms a one-call command took; node:http2 cost about
// 10 ms more than lib/h2.js (its load brings tls and crypto), a third of what Node itself
// takes to start. lib/h2.js speaks the HTTP/2 this client needs, and no more.
// The client needs little of gRPC: no TLS, no name resolution beyond net.connect, no
// deadlines, no compression, no retries, one connection. What it needs is here and in
// lib/grpc.js (the protocol's rules, pure): messages reassembled from DATA, the status from
// the trailers, a trailers-only response, an HTTP status or an RST_STREAM code, UNAVAILABLE
// when the connection fails or closes, and GOAWAY honoured: the calls on the departing
// session finish there, new ones open a new session.
//
// A call keeps the process alive (its session ref'd) until its owner says it may be left
// (`unref`): the owner of the call stream knows whether a tool call is in flight on it,
// HTTP/2 does not. A session with no ref'd call never keeps the process alive.

const net = require("node:net");
const {
  Code,
  MessageReader,
  frame,
  grpcStatus,
  h2ErrorName,
  headerValue,
  httpStatus,
  parseAddress,
  resetStatus,
  status,
} = require("./grpc");
const h2 = require("./h2");

const { NO_ERROR, CANCEL, PROTOCOL_ERROR } = h2.ErrorCode;

/** Header fields as an object, as gRPC reads them: a repeated name's values in an array. */
function fieldsObject(fields) {
  const headers = Object.create(null);
  for (const [name, value] of fields) {
    const held = headers[name];
    if (held === undefined) headers[name] = value;
    else if (Array.isArray(held)) held.push(value);
    else headers[name] = [held, value];
  }
  return headers;
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
    this.headersSeen = false;
  }

  _start(path, metadata) {
    const fields = [
      [":method", "POST"],
      [":scheme", "http"],
      [":authority", this.session.channel.target.authority],
      [":path", path],
      ["content-type", "application/grpc"],
      ["te", "trailers"],
      ...Object.entries(metadata),
    ];
    try {
      this.stream = this.session.h2.request(fields, this);
    } catch (error) {
      // A session closing under us (UNAVAILABLE), or headers HTTP/2 cannot carry: told as a
      // status, later, like every other end.
      const code = this.session.usable() ? Code.INTERNAL : Code.UNAVAILABLE;
      process.nextTick(() => this._finish(status(code, `cannot start the call: ${error.message}`)));
    }
  }

  // What lib/h2.js tells of the stream.

  headers(fields, endStream) {
    if (this.finished) return;
    const headers = fieldsObject(fields);
    if (!this.headersSeen) this._response(headers);
    else this.received ??= grpcStatus(headers) ?? status(Code.INTERNAL, "the daemon's trailers carry no grpc-status");
    if (endStream) this._ended();
  }

  data(bytes, endStream) {
    if (this.finished) return;
    if (!this.headersSeen) {
      this._finish(status(Code.INTERNAL, "the daemon sent a message before its response headers"), PROTOCOL_ERROR);
      return;
    }
    this._data(bytes);
    if (endStream) this._ended();
  }

  /** The daemon's side has ended: with the status it gave, or with the reset that may follow. */
  _ended() {
    if (this.received !== null) this._finish(this.received);
    // No status: a server that resets a stream it answered ends it first (nghttp2 does), and
    // the RST_STREAM, in the same read, says why. Otherwise no status ever came.
    else setImmediate(() => this._finish(resetStatus(NO_ERROR)));
  }

  reset(code) {
    this._finish(this.received ?? resetStatus(code));
  }

  lost() {
    this._finish(this.received ?? this.session.failure ?? this.session.failed(null));
  }

  _response(headers) {
    this.headersSeen = true;
    const code = Number(headers[":status"]);
    const carried = grpcStatus(headers);
    if (carried !== null) {
      this.received = carried; // trailers-only: the status, and nothing else, is coming
    } else if (code !== 200) {
      this._finish(httpStatus(code), CANCEL);
    } else {
      const type = headerValue(headers, "content-type") ?? "";
      if (!type.startsWith("application/grpc")) {
        const refusal = `the daemon answered with content-type ${JSON.stringify(type)}`;
        this._finish(status(Code.UNKNOWN, refusal), CANCEL);
        return;
      }
      this.handlers.onHeaders?.(headers);
    }
  }

  _data(chunk) {
    const { messages, refusal } = this.reader.push(chunk);
    for (const message of messages) {
      let decoded;
      try {
        decoded = this.handlers.decode(message);
      } catch (error) {
        this._finish(status(Code.INTERNAL, `cannot decode the daemon's message: ${error.message}`), CANCEL);
        return;
      }
      this.handlers.onMessage(decoded);
      if (this.finished) return; // the owner cancelled it
    }
    if (refusal !== null) this._finish(refusal, CANCEL);
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
    this.stream.end(bytes === undefined ? null : frame(bytes));
  }

  /** End the call from this side: its status is CANCELLED, told to `onStatus` like any other. */
  cancel() {
    this._finish(status(Code.CANCELLED, "cancelled by the client"), CANCEL);
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

  _finish(ended, resetCode = NO_ERROR) {
    if (this.finished) return;
    this.unref();
    this.finished = true;
    this.session.calls.delete(this);
    if (this.stream !== null) this.stream.close(resetCode);
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
    const { target } = channel;
    const socket = target.path === undefined ? net.connect(target.port, target.host) : net.connect(target.path);
    if (target.path === undefined) socket.setNoDelay(true);
    this.h2 = h2.connect(socket, {
      goaway: (code) => this._drain(code),
      closed: (error) => {
        this.failure ??= this.failed(error);
        channel.forget(this);
      },
    });
    this.h2.unref();
  }

  failed(error) {
    const address = this.channel.address;
    if (error === null) return status(Code.UNAVAILABLE, "the connection to the daemon closed");
    return status(Code.UNAVAILABLE, `the connection to the daemon at ${address} failed: ${error.message}`);
  }

  usable() {
    return !this.draining && this.failure === null && this.h2.usable();
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
    // GOAWAY: with NO_ERROR the calls already open finish and none start on this session;
    // with an error the connection ends, and the calls end UNAVAILABLE.
    if (code !== NO_ERROR) {
      this.failure ??= status(Code.UNAVAILABLE, `the daemon closed the connection (GOAWAY ${h2ErrorName(code)})`);
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
        else if (count === 1) callback(ended, response);
        else callback(status(Code.INTERNAL, `the daemon answered a unary call with ${count} messages`), null);
      },
    });
    call.end(bytes);
  }

  forget(session) {
    if (this.current === session) this.current = null;
    if (session.h2.ended) this.sessions.delete(session);
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

module.exports = { Channel, Code };
