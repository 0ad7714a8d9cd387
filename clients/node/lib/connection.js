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
//
// Batches: the stream is opened with `x-toolbridge-batches: 1`; a daemon that reads batches
// answers with `x-toolbridge-batch-bytes` in its initial metadata, the largest message it
// reads. Calls are encoded when made and wait in the stream's outbox; those made in the same
// tick, or while the previous message's write has not completed, go out together in one
// message (the rest in `more`) within that size, and the first waiting always goes, whatever
// its size (the daemon refuses it alone, as unbatched). Until the daemon has said so (an older
// daemon never does), each call is its own message. Answers are read from `more` too.

const grpc = require("@grpc/grpc-js");
const { ToolError } = require("./errors");
const { methods, packageDefinition } = require("./proto");
const { currentTraceparent } = require("./trace");
const { batchEntryBytes, batchMessage, statusError, streamRequest } = require("./wire");

const TOKEN_METADATA_KEY = "x-toolbridge-token";
const BATCHES_METADATA_KEY = "x-toolbridge-batches";
const BATCH_BYTES_METADATA_KEY = "x-toolbridge-batch-bytes";
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

function passEncoded(buffer) {
  return buffer;
}

function closedError() {
  return new ToolError("the connection to the daemon closed", { type: "Unavailable", retryable: true });
}

/** The largest batch a stream's initial metadata says the daemon reads (0: it said nothing). */
function batchBytesOf(metadata) {
  const [value] = metadata.get(BATCH_BYTES_METADATA_KEY);
  const bytes = Number(value);
  return Number.isSafeInteger(bytes) && bytes > 0 ? bytes : 0;
}

class CallStream {
  constructor(duplex) {
    this.duplex = duplex;
    /** call_id -> {resolve, reject} of the calls in flight on this stream (sent or queued). */
    this.pending = new Map();
    /** Encoded calls not yet written, oldest first; `outboxStart` is the next to go. */
    this.outbox = [];
    this.outboxStart = 0;
    /** A write is scheduled or in flight: calls made now wait in the outbox and join the next. */
    this.writing = false;
    /** The largest message the daemon reads; 0 until its initial metadata says. */
    this.batchBytes = 0;
  }

  /** The next message's calls: the first waiting, and as many more as the daemon reads. */
  takeBatch() {
    const { outbox } = this;
    const first = outbox[this.outboxStart++];
    const batch = [first];
    if (this.batchBytes > 0) {
      let size = first.length;
      while (this.outboxStart < outbox.length) {
        const more = batchEntryBytes(outbox[this.outboxStart].length);
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
   * @param {string} address `unix:/path/bridge.sock` or `host:port`.
   * @param {string} token The command's token.
   */
  constructor(address, token) {
    const { ToolBridgeService } = grpc.loadPackageDefinition(packageDefinition()).toolbridge.v1;
    this._client = new ToolBridgeService(address, grpc.credentials.createInsecure(), CHANNEL_OPTIONS);
    this._metadata = new grpc.Metadata();
    this._metadata.set(TOKEN_METADATA_KEY, token);
    this._streamMetadata = this._metadata.clone();
    this._streamMetadata.set(BATCHES_METADATA_KEY, "1");
    this._method = methods().CallToolStream;
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
    const callId = this._nextId++;
    const request = streamRequest(callId, toolName, positional, named, currentTraceparent());
    const encoded = this._method.requestSerialize(request);
    const stream = this._openStream();
    return new Promise((resolve, reject) => {
      stream.outbox.push(encoded);
      stream.pending.set(callId, { resolve, reject });
      if (!stream.writing) {
        stream.writing = true;
        // After the calls made in this tick (a Promise.all, or callers resumed by one batch
        // of answers), so that they go out together.
        process.nextTick(() => this._write(stream));
      }
    });
  }

  /** Write the outbox's next message; what comes meanwhile goes in the one after it. */
  _write(stream) {
    if (this._stream !== stream || !stream.hasOutbox()) {
      // Written, or failed with the stream (which emptied the outbox: a call failed is never
      // sent later, on this stream or another).
      stream.writing = false;
      return;
    }
    stream.duplex.write(batchMessage(stream.takeBatch()), () => this._write(stream));
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
    // Encoded when called (to know each call's size), so the stream's serializer only passes
    // the message on.
    const duplex = this._client.makeBidiStreamRequest(
      this._method.path,
      passEncoded,
      this._method.responseDeserialize,
      this._streamMetadata,
    );
    const stream = new CallStream(duplex);
    duplex.on("metadata", (metadata) => {
      stream.batchBytes = batchBytesOf(metadata);
    });
    duplex.on("data", (message) => {
      this._answered(stream, message);
      for (const answer of message.more) this._answered(stream, answer);
    });
    // grpc-js emits 'error' and then 'status' for a failed stream; 'status' alone says all.
    duplex.on("error", () => {});
    duplex.on("status", (status) => {
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
    stream.clearOutbox();
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

module.exports = {
  BATCHES_METADATA_KEY,
  BATCH_BYTES_METADATA_KEY,
  CHANNEL_OPTIONS,
  Connection,
  IDLE_CLOSE_MS,
  TOKEN_METADATA_KEY,
};
