"use strict";
// gRPC over node:http2, for the two calls this client makes: the bidi CallToolStream and the
// unary ListTools. The one module that opens a connection.
//
// Why node:http2 and a framing of our own rather than @connectrpc/connect-node's gRPC
// transport: Connect loads @bufbuild/protobuf's whole index (every well-known type) and its
// own layers, about 60 ms more for a sandboxed command's first call than this module and
// lib/grpc.js (bench/sandbox_startup.py measures both); and the client needs little of gRPC:
// no deadlines, no compression, no retries, one connection at a time. What it needs is here
// and in lib/grpc.js (the protocol's rules, pure): messages reassembled from DATA, the status
// from the trailers, a trailers-only response, an HTTP status or an RST_STREAM code,
// UNAVAILABLE when the connection fails or closes, GOAWAY honoured (the calls on the departing
// session finish there, new ones open a new session), and TLS (lib/tls.js). HTTP/2 itself,
// HPACK, flow control and the peer's abuses are nghttp2's, through node:http2.
//
// A call keeps the process alive (its session ref'd) until its owner says it may be left
// (`unref`): the owner of the call stream knows whether a tool call is in flight on it,
// HTTP/2 does not. A session with no ref'd call never keeps the process alive. While one
// is ref'd, the session is pinged (lib/keepalive.js): a connection the network dropped
// silently ends UNAVAILABLE within seconds, and its owner sends its calls again.

const http2 = require("node:http2");
const net = require("node:net");
const { Code, MessageReader, frame, grpcStatus, h2ErrorName, headerValue, httpStatus, parseAddress, resetStatus, status } =
  require("./grpc");
const { Keepalive } = require("./keepalive");
const { closedAfterHandshake, connectionFailure, secureSocket } = require("./tls");

const { NGHTTP2_CANCEL, NGHTTP2_FLOW_CONTROL_ERROR, NGHTTP2_NO_ERROR } = http2.constants;
/** What this side reads per stream and per connection before the daemon must wait. */
const RECEIVE_WINDOW = 4 * 1024 * 1024;
/**
 * node:http2 refuses new streams once a session holds this many megabytes unread or unsent
 * (its default, 10, is below two of the largest answers the client reads).
 */
const SESSION_MEMORY_MB = 256;

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
  }

  _start(path, metadata) {
    const headers = {
      ":method": "POST",
      ":path": path,
      "content-type": "application/grpc",
      te: "trailers",
      ...metadata,
    };
    let stream;
    try {
      stream = this.session.h2.request(headers, { endStream: false });
    } catch (error) {
      // A session closing under us (UNAVAILABLE), or headers HTTP/2 cannot carry: told as a
      // status, later, like every other end.
      const code = this.session.usable() ? Code.INTERNAL : Code.UNAVAILABLE;
      process.nextTick(() => this._finish(status(code, `cannot start the call: ${error.message}`)));
      return;
    }
    this.stream = stream;
    stream.on("response", (received) => this._response(received));
    stream.on("data", (chunk) => this._data(chunk));
    stream.on("trailers", (trailers) => {
      this.received ??= grpcStatus(trailers) ?? status(Code.INTERNAL, "the daemon's trailers carry no grpc-status");
    });
    // The daemon's side has ended: the status it gave ends the call, this side being done
    // too (a daemon that resets a stream it answered ends it first: the reset, in the same
    // read, says why when no status came).
    stream.on("end", () => {
      if (this.received !== null) this._finish(this.received);
      else setImmediate(() => this._closed());
    });
    stream.resume(); // an end with no DATA is still told
    stream.on("error", (error) => {
      // A stream reset comes with its code, told at `close`; any other error is the
      // connection's (node:http2 destroys a session's streams with it before the session
      // itself says so).
      // A stream cancelled before it started carries the connection's error as its cause.
      if (error.code !== "ERR_HTTP2_STREAM_ERROR") this.session.failure ??= this.session.failed(error.cause ?? error);
    });
    stream.on("close", () => this._closed());
  }

  _response(headers) {
    if (this.finished) return;
    const code = Number(headers[":status"]);
    const carried = grpcStatus(headers);
    if (carried !== null) {
      this.received = carried; // trailers-only: the status, and nothing else, is coming
    } else if (code !== 200) {
      this._finish(httpStatus(code), NGHTTP2_CANCEL);
    } else {
      const type = headerValue(headers, "content-type") ?? "";
      if (!type.startsWith("application/grpc")) {
        const refusal = `the daemon answered with content-type ${JSON.stringify(type)}`;
        this._finish(status(Code.UNKNOWN, refusal), NGHTTP2_CANCEL);
        return;
      }
      this.handlers.onHeaders?.(headers);
    }
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

  /** The stream has closed: with the status the daemon gave, or why it could not. */
  _closed() {
    if (this.finished) return;
    const { rstCode } = this.stream;
    if (rstCode === NGHTTP2_FLOW_CONTROL_ERROR) {
      // nghttp2 resets the stream when a SETTINGS change pushes its window past 2^31-1; RFC
      // 9113 (6.9.2) makes that the connection's error, and so does this client: a peer whose
      // flow control is broken gets no more calls on this connection.
      this.session.abandon("HTTP/2 flow control broke (FLOW_CONTROL_ERROR)", NGHTTP2_FLOW_CONTROL_ERROR);
    }
    // node:http2 closes a lost connection's streams before the session tells it closed.
    const { h2 } = this.session;
    if (h2.destroyed || h2.closed) this.session.failure ??= this.session.closedStatus();
    const lost = this.session.failure;
    if (this.received !== null) this._finish(this.received);
    else if (lost !== null) this._finish(lost);
    else this._finish(resetStatus(rstCode));
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

  _finish(ended, resetCode = NGHTTP2_NO_ERROR) {
    if (this.finished) return;
    this.unref();
    this.finished = true;
    this.session.calls.delete(this);
    if (this.stream !== null && !this.stream.closed && !this.stream.destroyed) this.stream.close(resetCode);
    this.handlers.onStatus(ended);
  }
}

/** One HTTP/2 connection to the daemon and the calls on it. */
class Session {
  constructor(channel) {
    this.channel = channel;
    this.calls = new Set();
    this.references = 0;
    /** Why the connection failed or closed (UNAVAILABLE, or the TLS failure), once it has. */
    this.failure = null;
    this.draining = false;
    /** The connection's socket (node:http2 makes it through `_socket`). */
    this.socket = null;
    const { target, tls } = channel;
    // The scheme and authority go in every request's headers; the connection is ours to make.
    const origin = `${tls === null ? "http" : "https"}://${target.path === undefined ? target.authority : "localhost"}`;
    this.h2 = http2.connect(origin, {
      createConnection: () => this._socket(),
      settings: { enablePush: false, initialWindowSize: RECEIVE_WINDOW },
      maxSessionMemory: SESSION_MEMORY_MB,
    });
    this.h2.on("connect", () => this.h2.setLocalWindowSize(RECEIVE_WINDOW));
    this.h2.on("goaway", (code) => this._drain(code));
    this.h2.on("error", (error) => {
      this.failure ??= this.failed(error);
    });
    this.h2.on("remoteSettings", () => {
      this.heard = true;
    });
    this.h2.on("close", () => {
      this.keepalive.stop();
      this.failure ??= this.closedStatus();
      this.closed = true;
      channel.forget(this);
    });
    this.closed = false;
    /** The TLS handshake is done; the daemon has sent its HTTP/2 settings. */
    this.handshaken = false;
    this.heard = false;
    this.keepalive = new Keepalive(this.h2, channel.keepalive, (why) => this.lost(why));
    this.h2.unref();
  }

  _socket() {
    const { target, tls } = this.channel;
    const where = target.path === undefined ? { host: target.host, port: target.port } : { path: target.path };
    if (tls !== null) {
      const socket = (this.socket = secureSocket(where, target, tls));
      socket.once("secureConnect", () => {
        this.handshaken = true;
        if (target.path === undefined) socket.setNoDelay(true);
      });
      return socket;
    }
    const socket = (this.socket = net.connect(where));
    if (target.path === undefined) socket.setNoDelay(true);
    return socket;
  }

  /** Why the connection closed when nothing said why. */
  closedStatus() {
    const { tls, address } = this.channel;
    if (tls !== null && this.handshaken && !this.heard) {
      return status(Code.UNAVAILABLE, `the daemon at ${address}: ${closedAfterHandshake(tls)}`, "TLSError");
    }
    return status(Code.UNAVAILABLE, "the connection to the daemon closed");
  }

  failed(error) {
    const address = this.channel.address;
    const failure = connectionFailure(error, this.channel.tls);
    if (failure !== null) return status(Code.UNAVAILABLE, `the daemon at ${address}: ${failure}`, "TLSError");
    return status(Code.UNAVAILABLE, `the connection to the daemon at ${address} failed: ${error.message}`);
  }

  /** End the connection for the daemon's protocol error `why`, telling it `code` in GOAWAY. */
  abandon(why, code) {
    this.failure ??= this.failed(new Error(why));
    this.channel.forget(this);
    // GOAWAY first, then close once it is written: destroy() would drop the socket before it.
    this.h2.goaway(code);
    for (const call of [...this.calls]) call._finish(this.failure, NGHTTP2_CANCEL);
    this.h2.close();
  }

  /** End a connection found dead (`why`: how): its calls end UNAVAILABLE. */
  lost(why) {
    this.failure ??= status(Code.UNAVAILABLE, `the connection to the daemon at ${this.channel.address} was lost: ${why}`);
    this.channel.forget(this);
    this.destroy();
  }

  /** Drop the connection now; one still being made too (node:http2 leaves its socket trying). */
  destroy() {
    this.keepalive.stop();
    this.h2.destroy();
    this.socket?.destroy();
  }

  usable() {
    return !this.draining && !this.closed && this.failure === null && !this.h2.closed && !this.h2.destroyed;
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
    if (before === 0 && this.references > 0) {
      this.h2.ref();
      this.keepalive.start();
    } else if (before > 0 && this.references === 0) {
      this.h2.unref();
      this.keepalive.stop();
    }
  }

  _drain(code) {
    // GOAWAY: with NO_ERROR the calls already open finish and none start on this session;
    // with an error node:http2 ends the connection, and the calls end UNAVAILABLE.
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
   * @param {{ maxMessageBytes: number, tls?: object | null, keepalive?: object }} options the
   *   largest message read, the TLS settings (lib/tls.js `tlsSettings`; null for clear text)
   *   and the pings' (lib/keepalive.js; its defaults unless tests shorten them).
   * @throws {TypeError} for an address this module does not read.
   */
  constructor(address, { maxMessageBytes, tls = null, keepalive = {} }) {
    this.address = address;
    this.target = parseAddress(address);
    if (this.target.tls && tls === null) throw new TypeError(`${JSON.stringify(address)} asks for TLS: give TLS settings`);
    this.tls = tls;
    this.maxMessageBytes = maxMessageBytes;
    this.keepalive = keepalive;
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
    return this.session().call(path, metadata, handlers);
  }

  /** The session new calls go on, opened now when there is none usable (see lib/reconnect.js). */
  session() {
    if (this.current === null || !this.current.usable()) {
      if (this.current !== null) this.forget(this.current);
      this.current = new Session(this);
      this.sessions.add(this.current);
    }
    return this.current;
  }

  forget(session) {
    if (this.current === session) this.current = null;
    if (session.closed) this.sessions.delete(session);
  }

  /** Close every session now: calls still open end with UNAVAILABLE. */
  close() {
    this.current = null;
    for (const session of this.sessions) {
      session.failure ??= status(Code.UNAVAILABLE, "the connection to the daemon closed");
      session.destroy();
    }
    this.sessions.clear();
  }
}

module.exports = { Channel, Code };
