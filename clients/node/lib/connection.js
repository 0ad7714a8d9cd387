"use strict";
// The connection to the daemon: one HTTP/2 session, and one CallToolStream on it carrying
// every call. The only module that reaches the network, through lib/transport.js.
//
// Calls are multiplexed over a long-lived bidi stream, as in the Python client: a message on
// an open stream costs less than a unary RPC. Each call carries an id; answers may come back
// in any order. A broken stream fails the calls it carried with a retryable `Unavailable`
// (or the status it ended with) and the next call opens a new one.
//
// One difference from Python, where the stream dies with its event loop: in Node an open
// stream would keep the process alive, so a script whose work is done would never exit. The
// stream therefore keeps the process alive only while a call is in flight on it (a call told
// that it waits for a person, `CallWaiting`, is in flight until its answer); between calls it
// stays open but lets the process exit, and the daemon sees the connection close when it does.
// No timer: a script exits as soon as its last answer is read.
//
// Batches: the stream is opened with `x-toolbridge-batches: 1`; a daemon that reads batches
// answers with `x-toolbridge-batch-bytes` in its initial metadata, the largest message it
// reads. Calls are encoded when made and wait in the stream's outbox; those made in the same
// tick, or while the previous message's write has not completed, go out together in one
// message (the rest in `more`) within that size, and the first waiting always goes, whatever
// its size (the daemon refuses it alone, as unbatched). Until the daemon has said so (an older
// daemon never does), each call is its own message. Answers are read from `more` too.
//
// GOAWAY: the stream on the departing session keeps the calls it carries (and sends those in
// its outbox) and is half-closed once they are answered; new calls open a stream on a new
// session.
//
// A lost connection (a network cut found by the keepalive's pings, a socket error, GOAWAY with
// an error, a daemon restarted), as in the Python client: every stream is opened with
// `x-toolbridge-session`, a random id of this connection's life, and with a call's id it names
// the call to the daemon. When a stream ends `Unavailable` with calls in flight, once a daemon
// has answered this connection, its calls are not failed: a new connection is made (backoff,
// lib/reconnect.js) and they are sent again on it under the same ids, with the calls made
// meanwhile after them; the daemon answers each from the call it already made (joined while
// the tool runs, its recorded result after), so a tool runs once. The connection is tried for
// `TOOLBRIDGE_RECONNECT_WINDOW` seconds from the loss (60); then the calls fail with a
// retryable `Unavailable` that says so, and the daemon still journals their outcome.

const crypto = require("node:crypto");
const { ToolError } = require("./errors");
const proto = require("./proto");
const { RECONNECT_WINDOW, formatSeconds, whenReady } = require("./reconnect");
const { currentTraceparent } = require("./trace");
const { Channel, Code } = require("./transport");
const { statusError, streamRequest } = require("./wire");

const { CallToolStreamRequestSchema, CallToolStreamResponseSchema, ListToolsRequestSchema, ListToolsResponseSchema } =
  proto;
const decodeAnswer = (bytes) => proto.decode(CallToolStreamResponseSchema, bytes);
const decodeListed = (bytes) => proto.decode(ListToolsResponseSchema, bytes);

const TOKEN_METADATA_KEY = "x-toolbridge-token";
const BATCHES_METADATA_KEY = "x-toolbridge-batches";
const BATCH_BYTES_METADATA_KEY = "x-toolbridge-batch-bytes";
/**
 * A random id of this connection's life: with a call's id, it names the call to the daemon,
 * so that a call sent again after its connection was lost meets the call already made.
 */
const SESSION_METADATA_KEY = "x-toolbridge-session";
// The transport's cap, as in the daemon; the daemon's per-call limits (256 KiB / 1 MiB by
// default) are far below it and answer with clear errors.
const TRANSPORT_MESSAGE_LIMIT = 64 * 1024 * 1024 + 64 * 1024;

function closedError() {
  return new ToolError("the connection to the daemon closed", { type: "Unavailable", retryable: true });
}

/** The largest batch a stream's response headers say the daemon reads (0: they said nothing). */
function batchBytesOf(headers) {
  const bytes = Number(headers[BATCH_BYTES_METADATA_KEY]);
  return Number.isSafeInteger(bytes) && bytes > 0 ? bytes : 0;
}

class CallStream {
  constructor() {
    /** The transport's call; set once opened. */
    this.call = null;
    /** call_id -> {resolve, reject, encoded} of the calls in flight on this stream (sent or queued). */
    this.pending = new Map();
    /** Encoded calls not yet written, oldest first; `outboxStart` is the next to go. */
    this.outbox = [];
    this.outboxStart = 0;
    /** A write is scheduled or in flight: calls made now wait in the outbox and join the next. */
    this.writing = false;
    /** The largest message the daemon reads; 0 until its response headers say. */
    this.batchBytes = 0;
    /** Its session is going away: no new calls; half-closed once the last is answered. */
    this.draining = false;
    /** Ended (its status came): nothing more is written or answered. */
    this.ended = false;
  }

  /** The next message's calls: the first waiting, and as many more as the daemon reads. */
  takeBatch() {
    const { outbox } = this;
    const first = outbox[this.outboxStart++];
    const batch = [first];
    if (this.batchBytes > 0) {
      let size = first.length;
      while (this.outboxStart < outbox.length) {
        const more = proto.batchEntryBytes(outbox[this.outboxStart].length);
        if (size + more > this.batchBytes) break;
        batch.push(outbox[this.outboxStart++]);
        size += more;
      }
    }
    if (this.outboxStart === outbox.length) this.clearOutbox();
    return batch;
  }

  hasOutbox() {
    return this.outboxStart < this.outbox.length;
  }

  clearOutbox() {
    this.outbox = [];
    this.outboxStart = 0;
  }
}

class Connection {
  /**
   * @param {string} address `unix:/path/bridge.sock`, `host:port` or `tls://host:port`.
   * @param {string} token The command's token.
   * @param {object | null} [tls] lib/tls.js `tlsSettings`, or null for clear text.
   * @param {{ reconnectWindow?: number, keepalive?: object }} [options] seconds a lost
   *   connection's calls are sent again for (0: never), and the pings' settings
   *   (lib/keepalive.js) when not the defaults.
   * @throws {TypeError} for an address the transport does not read.
   */
  constructor(address, token, tls = null, { reconnectWindow = RECONNECT_WINDOW, keepalive = {} } = {}) {
    this._channel = new Channel(address, { maxMessageBytes: TRANSPORT_MESSAGE_LIMIT, tls, keepalive });
    this._address = address;
    this._metadata = { [TOKEN_METADATA_KEY]: token };
    this._session = crypto.randomBytes(16).toString("hex");
    this._streamMetadata = { ...this._metadata, [BATCHES_METADATA_KEY]: "1", [SESSION_METADATA_KEY]: this._session };
    /** @type {CallStream | null} the stream new calls go on. */
    this._stream = null;
    this._nextId = 1;
    /** A stream of this connection has been answered by a daemon: a lost one is worth sending again. */
    this._connected = false;
    this._window = reconnectWindow;
    /**
     * While a lost connection's calls wait for a new one: call_id -> waiter (theirs, and those
     * made meanwhile), and how to stop waiting.
     * @type {{ calls: Map<number, object>, stop: () => void, deadline: NodeJS.Timeout | null } | null}
     */
    this._reconnecting = null;
  }

  /**
   * Send one call on the stream.
   * @returns {Promise<object>} the decoded CallToolStreamResponse answering it.
   */
  call(toolName, positional, named) {
    const callId = this._nextId++;
    const request = streamRequest(callId, toolName, positional, named, currentTraceparent());
    const encoded = proto.encode(CallToolStreamRequestSchema, request);
    if (encoded.length > TRANSPORT_MESSAGE_LIMIT) {
      // Refused here, alone: sent, it would end the stream and every call on it.
      const limit = TRANSPORT_MESSAGE_LIMIT;
      const message = `the call is ${encoded.length} bytes, more than the transport carries (${limit})`;
      return Promise.reject(statusError(Code.RESOURCE_EXHAUSTED, message));
    }
    return new Promise((resolve, reject) => {
      const waiter = { resolve, reject, encoded };
      if (this._reconnecting !== null) this._reconnecting.calls.set(callId, waiter); // sent once connected
      else this._send(this._openStream(), callId, waiter);
    });
  }

  /** Put one call in `stream`'s outbox, and write it with the others of this tick. */
  _send(stream, callId, waiter) {
    stream.outbox.push(waiter.encoded);
    stream.pending.set(callId, waiter);
    if (stream.pending.size === 1) stream.call.ref(); // in flight: the process waits for it
    if (!stream.writing) {
      stream.writing = true;
      // After the calls made in this tick (a Promise.all, or callers resumed by one batch
      // of answers), so that they go out together.
      process.nextTick(() => this._write(stream));
    }
  }

  /** Write the outbox's next message; what comes meanwhile goes in the one after it. */
  _write(stream) {
    if (stream.ended || !stream.hasOutbox()) {
      // Written, or failed with the stream (which emptied the outbox: a call failed is never
      // sent later, on this stream or another).
      stream.writing = false;
      return;
    }
    stream.call.write(proto.batchMessage(stream.takeBatch()), () => this._write(stream));
  }

  /** @returns {Promise<object>} the decoded ListToolsResponse (a unary call: one message). */
  listTools(format) {
    return new Promise((resolve, reject) => {
      const listed = [];
      const call = this._channel.call(proto.PATHS.ListTools, this._metadata, {
        decode: decodeListed,
        onMessage: (message) => listed.push(message),
        onStatus: (ended) => {
          if (ended.code !== Code.OK) reject(statusError(ended.code, ended.message, ended.type));
          else if (listed.length === 1) resolve(listed[0]);
          else reject(statusError(Code.INTERNAL, `the daemon answered a unary call with ${listed.length} messages`));
        },
      });
      call.end(proto.encode(ListToolsRequestSchema, { format }));
    });
  }

  /** Close the stream and the session; calls in flight fail with `Unavailable`. */
  close() {
    const stream = this._stream;
    this._stream = null;
    if (stream !== null) this._fail(stream, closedError());
    if (this._reconnecting !== null) this._giveUp(closedError());
    this._channel.close();
  }

  _openStream() {
    if (this._stream !== null) return this._stream;
    const stream = new CallStream();
    // Encoded when called (to know each call's size): the transport takes the bytes as they are.
    stream.call = this._channel.call(proto.PATHS.CallToolStream, this._streamMetadata, {
      decode: decodeAnswer,
      onHeaders: (headers) => {
        stream.batchBytes = batchBytesOf(headers);
        // The daemon's first answer on a stream says how large a batch it reads: a stream
        // that fails before any answer reached no daemon (as in the Python client).
        this._connected ||= stream.batchBytes > 0;
      },
      onMessage: (message) => {
        this._answered(stream, message);
        for (const answer of message.more) this._answered(stream, answer);
      },
      onStatus: (ended) => {
        if (this._stream === stream) this._stream = null;
        const error = ended.code === Code.OK ? closedError() : statusError(ended.code, ended.message, ended.type);
        if (error.type === "Unavailable" && this._connected && stream.pending.size > 0 && this._window > 0) {
          this._again(stream, error);
        } else {
          this._fail(stream, error);
        }
      },
      onDraining: () => {
        if (this._stream === stream) this._stream = null;
        stream.draining = true;
        if (stream.pending.size === 0) stream.call.end();
      },
    });
    this._stream = stream;
    return stream;
  }

  _answered(stream, answer) {
    const callId = Number(answer.callId);
    const waiter = stream.pending.get(callId);
    if (waiter === undefined) return;
    if (answer.answer.case === "waiting") {
      // Not an answer: the call waits for a person, for as long as it takes. It stays
      // pending (in flight: the process stays alive for it), and this client sets no
      // deadline on a call, so there is none to lift.
      waiter.waiting = answer.answer.value;
      return;
    }
    stream.pending.delete(callId);
    waiter.resolve(answer);
    if (stream.pending.size === 0) {
      stream.call.unref(); // open for the next call, but no reason to stay alive
      if (stream.draining) stream.call.end();
    }
  }

  /**
   * The connection under `stream` was lost (`failure`): its calls go again, under their ids,
   * on the stream new calls go on if there is one still standing, else on a new connection.
   */
  _again(stream, failure) {
    const calls = new Map([...stream.pending].sort(([a], [b]) => a - b));
    stream.pending.clear();
    this._fail(stream, failure);
    if (this._reconnecting !== null) {
      for (const [callId, waiter] of calls) this._reconnecting.calls.set(callId, waiter);
      return;
    }
    const current = this._stream;
    if (current !== null && !current.ended && !current.draining) {
      for (const [callId, waiter] of calls) this._send(current, callId, waiter); // a GOAWAY's old session lost
      return;
    }
    const reconnecting = { calls, stop: () => {}, deadline: null };
    this._reconnecting = reconnecting;
    const window = this._window;
    if (window * 1000 <= 2 ** 31 - 1) {
      const message =
        `the daemon at ${this._address} was unreachable for ${formatSeconds(window)} s (${failure.message}); ` +
        "the call's outcome, if it ran, is in the daemon's journal";
      const given = new ToolError(message, { type: "Unavailable", retryable: true });
      reconnecting.deadline = setTimeout(() => this._giveUp(given), window * 1000);
    }
    // Ready at once when the session is still standing (the stream alone ended): then the
    // calls are sent again before this returns.
    const stop = whenReady(this._channel, () => this._reconnected());
    if (this._reconnecting === reconnecting) reconnecting.stop = stop;
  }

  /** A new connection is ready: the calls waiting for it go on a new stream, oldest first. */
  _reconnected() {
    const { calls, deadline } = this._reconnecting;
    clearTimeout(deadline);
    this._reconnecting = null;
    const stream = this._openStream();
    for (const [callId, waiter] of [...calls].sort(([a], [b]) => a - b)) this._send(stream, callId, waiter);
  }

  /** Stop waiting for a new connection: the calls waiting fail with `error`. */
  _giveUp(error) {
    const { calls, stop, deadline } = this._reconnecting;
    clearTimeout(deadline);
    this._reconnecting = null;
    stop();
    for (const waiter of calls.values()) waiter.reject(error);
  }

  _fail(stream, error) {
    stream.ended = true;
    stream.clearOutbox();
    for (const waiter of stream.pending.values()) waiter.reject(error);
    stream.pending.clear();
    stream.call.cancel(); // ended already when the status came; when closing, ended now
  }
}

module.exports = {
  BATCHES_METADATA_KEY,
  BATCH_BYTES_METADATA_KEY,
  Connection,
  SESSION_METADATA_KEY,
  TOKEN_METADATA_KEY,
  TRANSPORT_MESSAGE_LIMIT,
};
