"use strict";
// The connection to the daemon: one channel, and one CallToolStream carrying every call.
//
// Calls are multiplexed over a long-lived bidi stream, as in the Python client: a message on
// an open stream costs less than a unary RPC. Each call carries an id; answers may come back
// in any order. A broken stream fails the calls it carried with a retryable `Unavailable`
// (or the status it ended with) and the next call opens a new one.
//
// One difference from Python, where the stream dies with its event loop: in Node an open
// stream keeps the process alive, so a script whose work is done would never exit. The
// stream is therefore half-closed once no call has been in flight for IDLE_CLOSE_MS. Calls
// made back to back (`await tools.a(); await tools.b()`) or concurrently keep one stream.
// A call told that it waits for a person (`CallWaiting`) stays pending until its answer.

const grpc = require("@grpc/grpc-js");
const { ToolError } = require("./errors");
const { packageDefinition } = require("./proto");
const { statusError, streamRequest } = require("./wire");

const TOKEN_METADATA_KEY = "x-toolbridge-token";
// The transport's cap, as in the daemon; the daemon's per-call limits (256 KiB / 1 MiB by
// default) are far below it and answer with clear errors.
const TRANSPORT_MESSAGE_LIMIT = 64 * 1024 * 1024 + 64 * 1024;
const IDLE_CLOSE_MS = 20;

const CHANNEL_OPTIONS = {
  "grpc.max_receive_message_length": TRANSPORT_MESSAGE_LIMIT,
  "grpc.max_send_message_length": TRANSPORT_MESSAGE_LIMIT,
};

/** The ToolError for a failed RPC (a grpc-js ServiceError or a status). */
function rpcError({ code, details }) {
  return statusError(code, details || grpc.status[code] || `gRPC status ${code}`);
}

function closedError() {
  return new ToolError("the connection to the daemon closed", { type: "Unavailable", retryable: true });
}

class CallStream {
  constructor(duplex) {
    this.duplex = duplex;
    /** call_id -> {resolve, reject} of the calls in flight on this stream. */
    this.pending = new Map();
  }
}

class Connection {
  /**
   * @param {string} address `unix:/path/bridge.sock` or `host:port`.
   * @param {string} token The command's token.
   */
  constructor(address, token) {
    const { ToolBridgeService } = grpc.loadPackageDefinition(packageDefinition()).toolbridge.v1;
    this._client = new ToolBridgeService(address, grpc.credentials.createInsecure(), CHANNEL_OPTIONS);
    this._metadata = new grpc.Metadata();
    this._metadata.set(TOKEN_METADATA_KEY, token);
    /** @type {CallStream | null} */
    this._stream = null;
    this._nextId = 1;
    this._idleTimer = null;
  }

  /**
   * Send one call on the stream.
   * @returns {Promise<object>} the decoded CallToolStreamResponse answering it.
   */
  call(toolName, positional, named) {
    const stream = this._openStream();
    const callId = this._nextId++;
    return new Promise((resolve, reject) => {
      stream.pending.set(callId, { resolve, reject });
      stream.duplex.write(streamRequest(callId, toolName, positional, named));
    });
  }

  /** @returns {Promise<object>} the decoded ListToolsResponse. */
  listTools(format) {
    return new Promise((resolve, reject) => {
      this._client.ListTools({ format }, this._metadata, (error, response) => {
        if (error) reject(rpcError(error));
        else resolve(response);
      });
    });
  }

  /** Close the stream and the channel; calls in flight fail with `Unavailable`. */
  close() {
    this._cancelIdleClose();
    const stream = this._stream;
    this._stream = null;
    if (stream !== null) {
      this._fail(stream, closedError());
      // The channel's close leaves open calls open, and an open stream keeps the process alive.
      stream.duplex.cancel();
    }
    this._client.close();
  }

  _openStream() {
    this._cancelIdleClose();
    if (this._stream !== null) return this._stream;
    const stream = new CallStream(this._client.CallToolStream(this._metadata));
    stream.duplex.on("data", (answer) => this._answered(stream, answer));
    // grpc-js emits 'error' and then 'status' for a failed stream; 'status' alone says all.
    stream.duplex.on("error", () => {});
    stream.duplex.on("status", (status) => {
      if (this._stream === stream) this._stream = null;
      this._fail(stream, status.code === grpc.status.OK ? closedError() : rpcError(status));
    });
    this._stream = stream;
    return stream;
  }

  _answered(stream, answer) {
    const waiter = stream.pending.get(answer.call_id);
    if (waiter === undefined) return;
    if (answer.answer === "waiting") {
      // Not an answer: the call waits for a person, for as long as it takes. It stays
      // pending (which also keeps the stream open: the idle close needs no call in flight),
      // and this client sets no deadline on a call, so there is none to lift.
      waiter.waiting = answer.waiting;
      return;
    }
    stream.pending.delete(answer.call_id);
    waiter.resolve(answer);
    if (stream.pending.size === 0 && this._stream === stream) this._scheduleIdleClose(stream);
  }

  _fail(stream, error) {
    for (const waiter of stream.pending.values()) waiter.reject(error);
    stream.pending.clear();
  }

  _scheduleIdleClose(stream) {
    this._cancelIdleClose();
    // Unref'd: the timer alone never keeps the process alive (the open stream does, until
    // the timer closes it).
    this._idleTimer = setTimeout(() => {
      this._idleTimer = null;
      if (this._stream === stream && stream.pending.size === 0) {
        this._stream = null;
        stream.duplex.end();
      }
    }, IDLE_CLOSE_MS).unref();
  }

  _cancelIdleClose() {
    if (this._idleTimer !== null) {
      clearTimeout(this._idleTimer);
      this._idleTimer = null;
    }
  }
}

module.exports = { CHANNEL_OPTIONS, Connection, IDLE_CLOSE_MS, TOKEN_METADATA_KEY };
