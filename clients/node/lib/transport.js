"use strict";
// gRPC over one HTTP/2 session, with node:http2 alone, for the two calls this client makes:
// the bidi CallToolStream and the unary ListTools. The one module that opens a socket.
//
// Why not @grpc/grpc-js: loading it and making its first call cost a sandboxed command about
// 64 ms of the ~150 ms a one-call command takes; node:http2 makes the same call in about 7 ms.
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

const http2 = require("node:http2");
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

const { NGHTTP2_NO_ERROR, NGHTTP2_CANCEL } = http2.constants;

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
      // A session closing under us (UNAVAILABLE), or headers HTTP/2 cannot carry: told as a
      // status, later, like every other end.
      const code = this.session.usable() ? Code.INTERNAL : Code.UNAVAILABLE;
      process.nextTick(() => this._finish(status(code, `cannot start the call: ${error.message}`)));
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
    // Every message has been read by then; without a status, 'close' says what ended it.
    stream.on("end", () => {
      if (this.received !== null) this._finish(this.received);
    });
    // What ended it is told by 'close' (the reset code, or the session's failure); without a
    // listener the error would be thrown.
    stream.on("error", () => {});
    stream.on("close", () => this._closed());
  }

  _response(headers) {
    if (this.finished) return;
    this.headersSeen = true;
    const code = Number(headers[":status"]);
    const carried = grpcStatus(headers);
    if (carried !== null) {
      this.received = carried; // trailers-only: the status, and nothing else, is coming
    } else if (code !== 200) {
      this._finish(httpStatus(code), NGHTTP2_CANCEL);
      return;
    } else {
      const type = headerValue(headers, "content-type") ?? "";
      if (!type.startsWith("application/grpc")) {
        const refusal = `the daemon answered with content-type ${JSON.stringify(type)}`;
        this._finish(status(Code.UNKNOWN, refusal), NGHTTP2_CANCEL);
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
    if (this.received !== null) this._finish(this.received); // the daemon had said how it ended
    else if (this.session.failure !== null) this._finish(this.session.failure);
    else this._finish(resetStatus(this.stream.rstCode));
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
    if (error === null) return status(Code.UNAVAILABLE, "the connection to the daemon closed");
    return status(Code.UNAVAILABLE, `the connection to the daemon at ${address} failed: ${error.message}`);
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

module.exports = { Channel, Code };
