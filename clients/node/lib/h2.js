"use strict";
// An HTTP/2 client connection (RFC 9113) over one socket, as much of the protocol as a gRPC
// client needs: streams opened by this side, HEADERS (and CONTINUATION) and DATA both ways,
// flow control both ways, SETTINGS, PING answered, RST_STREAM and GOAWAY. No server push (it
// is turned off), no priorities, no TLS, no upgrade: the daemon speaks cleartext HTTP/2 from
// the first byte ("prior knowledge").
//
// Why not node:http2: loading it (it loads tls and crypto too) and setting up its session cost
// a sandboxed command that makes one tool call about 10 ms, a third of what Node takes to
// start; with this module (and the code cache, lib/loader.js) the call comes within about 4 ms
// of writing its frames to a socket by hand. The preface, SETTINGS and the first call's
// HEADERS and DATA are written before the connection is even established.
//
// lib/transport.js drives it and turns what happens to a stream into gRPC's terms. Each stream
// tells its owner, through the `handler` given to `request`: `headers(fields, endStream)`,
// `data(bytes, endStream)`, `reset(code)` (the peer's RST_STREAM, or REFUSED_STREAM for a
// stream GOAWAY says was never processed), and `lost()` (the connection ended under it; its
// owner heard why first). Nothing more is heard of a stream after `reset`, `lost`, or both
// sides' END_STREAM.

const { HeaderDecoder, HpackError, encodeHeaders } = require("./hpack");

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
const FRAME_HEADER_BYTES = 9;

const DATA = 0;
const HEADERS = 1;
const RST_STREAM = 3;
const SETTINGS = 4;
const PUSH_PROMISE = 5;
const PING = 6;
const GOAWAY = 7;
const WINDOW_UPDATE = 8;
const CONTINUATION = 9;

const END_STREAM = 0x1;
const ACK = 0x1;
const END_HEADERS = 0x4;
const PADDED = 0x8;
const PRIORITY = 0x20;

const SETTINGS_HEADER_TABLE_SIZE = 1;
const SETTINGS_ENABLE_PUSH = 2;
const SETTINGS_MAX_CONCURRENT_STREAMS = 3;
const SETTINGS_INITIAL_WINDOW_SIZE = 4;
const SETTINGS_MAX_FRAME_SIZE = 5;

/** HTTP/2 error codes (RFC 9113, section 7) this side sends or acts on. */
const ErrorCode = Object.freeze({
  NO_ERROR: 0,
  PROTOCOL_ERROR: 1,
  FLOW_CONTROL_ERROR: 3,
  STREAM_CLOSED: 5,
  FRAME_SIZE_ERROR: 6,
  REFUSED_STREAM: 7,
  CANCEL: 8,
  COMPRESSION_ERROR: 9,
});

const DEFAULT_WINDOW = 65535;
const DEFAULT_FRAME_SIZE = 16384;
const MAX_WINDOW = 2 ** 31 - 1;
const MAX_STREAM_ID = 2 ** 31 - 1;
/** What this side reads per stream and per connection before the peer must wait for it. */
const RECEIVE_WINDOW = 4 * 1024 * 1024;
/** The header table this side keeps for the peer's encoder: the RFC's default. */
const HEADER_TABLE_BYTES = 4096;
/** The most a response's headers or trailers may decode to: far above any gRPC status. */
const HEADER_LIST_BYTES = 1024 * 1024;

function frameHeader(length, type, flags, streamId) {
  const header = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
  header.writeUIntBE(length, 0, 3);
  header[3] = type;
  header[4] = flags;
  header.writeUInt32BE(streamId, 5);
  return header;
}

function frameOf(type, flags, streamId, payload) {
  return Buffer.concat([frameHeader(payload.length, type, flags, streamId), payload]);
}

function uint32(value) {
  const bytes = Buffer.allocUnsafe(4);
  bytes.writeUInt32BE(value, 0);
  return bytes;
}

/** A connection error: the peer broke the protocol, and the connection ends with `code`. */
class ConnectionError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

class Stream {
  constructor(session, handler) {
    this.session = session;
    this.handler = handler;
    /** 0 until its HEADERS go out (they may wait for the peer's stream limit). */
    this.id = 0;
    this.headerBlock = null;
    this.sendWindow = session.peerInitialWindow;
    this.receiveWindow = RECEIVE_WINDOW;
    this.unacknowledged = 0;
    /** DATA not yet sent: `{ bytes, offset, end, done }`, oldest first. */
    this.outbox = [];
    this.localEnded = false; // END_STREAM queued or sent by this side
    this.remoteEnded = false;
    this.closed = false;
  }

  /** Queue `bytes` as DATA; `done()` once they are handed to the socket (or the stream ends). */
  write(bytes, done = null) {
    if (this.closed || this.localEnded) {
      if (done !== null) process.nextTick(done);
      return;
    }
    this.outbox.push({ bytes, offset: 0, end: false, done });
    this.session.sending.add(this);
    this.session._flush();
  }

  /** Half-close this side, after `bytes` if given. */
  end(bytes = null) {
    if (this.closed || this.localEnded) return;
    this.localEnded = true;
    this.outbox.push({ bytes: bytes ?? Buffer.alloc(0), offset: 0, end: true, done: null });
    this.session.sending.add(this);
    this.session._flush();
  }

  /** End the stream from this side: RST_STREAM `code` unless both sides had ended it. */
  close(code) {
    if (this.closed) return;
    if (this.id !== 0 && !(this.localEnded && this.remoteEnded && this.outbox.length === 0)) {
      this.session._write(frameOf(RST_STREAM, 0, this.id, uint32(code)));
    }
    this.session._forget(this);
  }
}

class Session {
  /**
   * @param {import("node:net").Socket} socket connecting or connected; this session owns it.
   * @param {{ goaway: (code: number) => void, closed: (error: Error | null) => void }} owner
   *   told of GOAWAY, and once the connection has ended (with the socket's error, or why
   *   this side ended it), before its streams are lost.
   */
  constructor(socket, owner) {
    this.socket = socket;
    this.owner = owner;
    /** @type {Map<number, Stream>} open streams by id. */
    this.streams = new Map();
    /** Streams waiting for the peer's concurrency limit to let their HEADERS go. */
    this.waiting = [];
    this.nextStreamId = 1;
    this.peerInitialWindow = DEFAULT_WINDOW;
    this.peerFrameSize = DEFAULT_FRAME_SIZE;
    this.peerMaxStreams = Infinity;
    this.sendWindow = DEFAULT_WINDOW;
    this.receiveWindow = RECEIVE_WINDOW;
    this.unacknowledged = 0;
    this.decoder = new HeaderDecoder(HEADER_TABLE_BYTES, HEADER_LIST_BYTES);
    /** Streams with DATA to send, in the order they asked. */
    this.sending = new Set();
    /** The stream whose header block CONTINUATION frames are completing, and its parts so far. */
    this.continuing = null;
    /** GOAWAY's last stream id: no stream above it was processed, none may be opened. */
    this.lastStreamId = MAX_STREAM_ID;
    this.goingAway = false;
    this.ended = false;
    this.chunks = [];
    this.buffered = 0;

    socket.on("data", (chunk) => this._received(chunk));
    socket.on("error", (error) => this._end(error));
    socket.on("close", () => this._end(null));
    const settings = Buffer.alloc(12);
    settings.writeUInt16BE(SETTINGS_ENABLE_PUSH, 0);
    settings.writeUInt32BE(0, 2);
    settings.writeUInt16BE(SETTINGS_INITIAL_WINDOW_SIZE, 6);
    settings.writeUInt32BE(RECEIVE_WINDOW, 8);
    // Written before the socket connects (Node holds writes until it has), and the first
    // stream's frames follow at once: HTTP/2 lets a client send before the peer's SETTINGS.
    socket.write(
      Buffer.concat([
        PREFACE,
        frameOf(SETTINGS, 0, 0, settings),
        frameOf(WINDOW_UPDATE, 0, 0, uint32(RECEIVE_WINDOW - DEFAULT_WINDOW)),
      ]),
    );
  }

  /** New streams may be opened: not going away, not ended, stream ids left. */
  usable() {
    return !this.goingAway && !this.ended && this.nextStreamId <= MAX_STREAM_ID;
  }

  /**
   * Open a stream with `fields` (`[name, value]` pairs) as its request headers.
   * @throws {TypeError} for headers HTTP/2 cannot carry; {Error} once the session is not usable.
   */
  request(fields, handler) {
    if (!this.usable()) throw new Error("the connection is closing");
    const stream = new Stream(this, handler);
    stream.headerBlock = encodeHeaders(fields);
    this.waiting.push(stream);
    this._open();
    return stream;
  }

  ref() {
    this.socket.ref();
  }

  unref() {
    this.socket.unref();
  }

  /** Close the connection now; its streams are lost. */
  destroy() {
    this.socket.destroy();
    this._end(null);
  }

  _open() {
    while (this.waiting.length > 0 && this.streams.size < this.peerMaxStreams && this.usable()) {
      const stream = this.waiting.shift();
      if (stream.closed) continue;
      stream.id = this.nextStreamId;
      this.nextStreamId += 2;
      this.streams.set(stream.id, stream);
      const block = stream.headerBlock;
      stream.headerBlock = null;
      const frames = [];
      for (let at = 0; at === 0 || at < block.length; at += this.peerFrameSize) {
        const part = block.subarray(at, at + this.peerFrameSize);
        const last = at + this.peerFrameSize >= block.length;
        frames.push(frameOf(at === 0 ? HEADERS : CONTINUATION, last ? END_HEADERS : 0, stream.id, part));
      }
      this._write(frames.length === 1 ? frames[0] : Buffer.concat(frames));
      if (stream.outbox.length > 0) this.sending.add(stream);
    }
    this._flush();
  }

  _write(bytes, done = undefined) {
    if (!this.ended) this.socket.write(bytes, done);
    else if (done !== undefined) process.nextTick(done);
  }

  /** Send what the flow-control windows let go, stream by stream in the order they asked. */
  _flush() {
    if (this.ended) return;
    for (const stream of this.sending) {
      if (stream.id === 0) continue; // its HEADERS wait
      while (stream.outbox.length > 0) {
        const entry = stream.outbox[0];
        const left = entry.bytes.length - entry.offset;
        const size = Math.max(0, Math.min(left, this.sendWindow, stream.sendWindow, this.peerFrameSize));
        if (size <= 0 && left > 0) break; // a window is shut: WINDOW_UPDATE resumes
        const last = size === left;
        const payload = entry.bytes.subarray(entry.offset, entry.offset + size);
        entry.offset += size;
        this.sendWindow -= size;
        stream.sendWindow -= size;
        const flags = last && entry.end ? END_STREAM : 0;
        const done = last && entry.done !== null ? entry.done : undefined;
        this._write(Buffer.concat([frameHeader(size, DATA, flags, stream.id), payload]), done);
        if (!last) continue;
        stream.outbox.shift();
        if (entry.end) this._halfClosed(stream, "local");
      }
      if (stream.outbox.length === 0) this.sending.delete(stream);
    }
  }

  _halfClosed(stream, side) {
    if (side === "remote") stream.remoteEnded = true;
    if (stream.localEnded && stream.remoteEnded && stream.outbox.length === 0) this._forget(stream);
  }

  _forget(stream) {
    if (stream.closed) return;
    stream.closed = true;
    for (const entry of stream.outbox) if (entry.done !== null) process.nextTick(entry.done);
    stream.outbox = [];
    this.sending.delete(stream);
    if (stream.id !== 0) this.streams.delete(stream.id);
    if (this.goingAway && this.streams.size === 0 && this.waiting.length === 0) this.destroy();
    else this._open();
  }

  _received(chunk) {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    try {
      while (this.buffered >= FRAME_HEADER_BYTES && !this.ended) {
        const header = this._peek(FRAME_HEADER_BYTES);
        const length = header.readUIntBE(0, 3);
        if (length > DEFAULT_FRAME_SIZE) {
          throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, `a frame of ${length} bytes, above the 16384 allowed`);
        }
        if (this.buffered < FRAME_HEADER_BYTES + length) break;
        this._take(FRAME_HEADER_BYTES);
        const payload = this._take(length);
        this._frame(header[3], header[4], header.readUInt32BE(5) & MAX_STREAM_ID, payload);
      }
    } catch (error) {
      if (!(error instanceof ConnectionError)) throw error;
      // GOAWAY says why, then the socket closes once it is written.
      const goaway = frameOf(GOAWAY, 0, 0, Buffer.concat([uint32(0), uint32(error.code)]));
      this.socket.end(goaway, () => this.socket.destroy());
      this._end(new Error(`the daemon broke HTTP/2: ${error.message}`));
    }
  }

  _peek(count) {
    if (this.chunks[0].length < count) this.chunks = [Buffer.concat(this.chunks)];
    return this.chunks[0].subarray(0, count);
  }

  _take(count) {
    if (count === 0) return Buffer.alloc(0);
    if (this.chunks[0].length < count) this.chunks = [Buffer.concat(this.chunks)];
    const first = this.chunks[0];
    const taken = first.subarray(0, count);
    if (first.length === count) this.chunks.shift();
    else this.chunks[0] = first.subarray(count);
    this.buffered -= count;
    return taken;
  }

  _frame(type, flags, streamId, payload) {
    if (this.continuing !== null && (type !== CONTINUATION || streamId !== this.continuing.streamId)) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "a header block was interrupted by another frame");
    }
    switch (type) {
      case DATA:
        return this._data(flags, streamId, payload);
      case HEADERS:
        return this._headers(flags, streamId, payload);
      case CONTINUATION:
        if (this.continuing === null) {
          throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "CONTINUATION after no HEADERS");
        }
        this.continuing.parts.push(payload);
        this.continuing.size += payload.length;
        if (this.continuing.size > HEADER_LIST_BYTES) {
          // Decoded, it could only be larger: refused before more of it is held.
          throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `a header block above ${HEADER_LIST_BYTES} bytes`);
        }
        if (flags & END_HEADERS) this._headerBlock();
        return undefined;
      case RST_STREAM:
        return this._reset(streamId, payload);
      case SETTINGS:
        return this._settings(flags, streamId, payload);
      case PUSH_PROMISE:
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "PUSH_PROMISE, and push is turned off");
      case PING:
        if (streamId !== 0 || payload.length !== 8) {
          throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "a malformed PING");
        }
        if (!(flags & ACK)) this._write(frameOf(PING, ACK, 0, payload));
        return undefined;
      case GOAWAY:
        return this._goaway(streamId, payload);
      case WINDOW_UPDATE:
        return this._windowUpdate(streamId, payload);
      default:
        return undefined; // PRIORITY, and frame types this side does not know, are ignored
    }
  }

  /** A stream the peer may send on: an open one, or `null` for one this side has forgotten. */
  _streamFor(streamId, frameName) {
    if (streamId === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `${frameName} on stream 0`);
    if (streamId % 2 === 0 || streamId >= this.nextStreamId) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `${frameName} on stream ${streamId}, never opened`);
    }
    return this.streams.get(streamId) ?? null;
  }

  _unpadded(flags, payload) {
    if (!(flags & PADDED)) return payload;
    if (payload.length < 1 || payload[0] >= payload.length) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "padding longer than its frame");
    }
    return payload.subarray(1, payload.length - payload[0]);
  }

  _data(flags, streamId, payload) {
    const stream = this._streamFor(streamId, "DATA");
    if (payload.length > this.receiveWindow) {
      throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "DATA beyond the connection's window");
    }
    this.receiveWindow -= payload.length;
    this.unacknowledged += payload.length;
    if (this.unacknowledged >= RECEIVE_WINDOW / 2) {
      this._write(frameOf(WINDOW_UPDATE, 0, 0, uint32(this.unacknowledged)));
      this.receiveWindow += this.unacknowledged;
      this.unacknowledged = 0;
    }
    const bytes = this._unpadded(flags, payload);
    if (stream === null) return; // reset by this side: what was already sent still arrives
    if (stream.remoteEnded) {
      stream.close(ErrorCode.STREAM_CLOSED);
      stream.handler.reset(ErrorCode.STREAM_CLOSED);
      return;
    }
    if (payload.length > stream.receiveWindow) {
      stream.close(ErrorCode.FLOW_CONTROL_ERROR);
      stream.handler.reset(ErrorCode.FLOW_CONTROL_ERROR);
      return;
    }
    stream.receiveWindow -= payload.length;
    stream.unacknowledged += payload.length;
    const ended = (flags & END_STREAM) !== 0;
    if (!ended && stream.unacknowledged >= RECEIVE_WINDOW / 2) {
      this._write(frameOf(WINDOW_UPDATE, 0, stream.id, uint32(stream.unacknowledged)));
      stream.receiveWindow += stream.unacknowledged;
      stream.unacknowledged = 0;
    }
    if (ended) this._halfClosed(stream, "remote");
    stream.handler.data(bytes, ended);
  }

  _headers(flags, streamId, payload) {
    this._streamFor(streamId, "HEADERS");
    let fragment = this._unpadded(flags, payload);
    if (flags & PRIORITY) {
      if (fragment.length < 5) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "a HEADERS frame too short");
      fragment = fragment.subarray(5);
    }
    this.continuing = { streamId, endStream: (flags & END_STREAM) !== 0, parts: [fragment], size: fragment.length };
    if (flags & END_HEADERS) this._headerBlock();
  }

  _headerBlock() {
    const { streamId, endStream, parts } = this.continuing;
    this.continuing = null;
    let fields;
    try {
      // Decoded even for a stream this side forgot: the table must follow the peer's.
      fields = this.decoder.decode(parts.length === 1 ? parts[0] : Buffer.concat(parts));
    } catch (error) {
      if (!(error instanceof HpackError)) throw error;
      throw new ConnectionError(ErrorCode.COMPRESSION_ERROR, error.message);
    }
    const stream = this.streams.get(streamId);
    if (stream === undefined) return;
    if (stream.remoteEnded) {
      stream.close(ErrorCode.STREAM_CLOSED);
      stream.handler.reset(ErrorCode.STREAM_CLOSED);
      return;
    }
    if (endStream) this._halfClosed(stream, "remote");
    stream.handler.headers(fields, endStream);
  }

  _reset(streamId, payload) {
    const stream = this._streamFor(streamId, "RST_STREAM");
    if (payload.length !== 4) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "a malformed RST_STREAM");
    if (stream === null) return;
    this._forget(stream);
    stream.handler.reset(payload.readUInt32BE(0));
  }

  _settings(flags, streamId, payload) {
    if (streamId !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "SETTINGS on a stream");
    if (flags & ACK) {
      if (payload.length !== 0) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "a SETTINGS ACK with a payload");
      return;
    }
    if (payload.length % 6 !== 0) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "a malformed SETTINGS");
    for (let at = 0; at < payload.length; at += 6) {
      const value = payload.readUInt32BE(at + 2);
      switch (payload.readUInt16BE(at)) {
        case SETTINGS_INITIAL_WINDOW_SIZE: {
          if (value > MAX_WINDOW) throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "a window above 2^31-1");
          const delta = value - this.peerInitialWindow;
          this.peerInitialWindow = value;
          for (const stream of this.streams.values()) stream.sendWindow += delta;
          for (const stream of this.waiting) stream.sendWindow += delta;
          break;
        }
        case SETTINGS_MAX_FRAME_SIZE:
          if (value < DEFAULT_FRAME_SIZE || value > 2 ** 24 - 1) {
            throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `SETTINGS_MAX_FRAME_SIZE ${value}`);
          }
          this.peerFrameSize = value;
          break;
        case SETTINGS_MAX_CONCURRENT_STREAMS:
          this.peerMaxStreams = value;
          break;
        case SETTINGS_ENABLE_PUSH:
          if (value > 1) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `SETTINGS_ENABLE_PUSH ${value}`);
          break;
        default:
          break; // the header table (this side's encoder keeps none) and settings it does not know
      }
    }
    this._write(frameOf(SETTINGS, ACK, 0, Buffer.alloc(0)));
    this._open();
  }

  _goaway(streamId, payload) {
    if (streamId !== 0 || payload.length < 8) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "a malformed GOAWAY");
    const lastStreamId = payload.readUInt32BE(0) & MAX_STREAM_ID;
    const code = payload.readUInt32BE(4);
    this.lastStreamId = Math.min(this.lastStreamId, lastStreamId);
    this.goingAway = true;
    this.owner.goaway(code);
    if (code !== ErrorCode.NO_ERROR) {
      this.destroy(); // an error: the peer is done with every stream
      return;
    }
    // Streams above the last one the peer processed were not: they may go again elsewhere.
    const refused = [...this.waiting, ...[...this.streams.values()].filter((stream) => stream.id > this.lastStreamId)];
    this.waiting = [];
    for (const stream of refused) {
      this._forget(stream);
      stream.handler.reset(ErrorCode.REFUSED_STREAM);
    }
    if (this.streams.size === 0) this.destroy();
  }

  _windowUpdate(streamId, payload) {
    if (payload.length !== 4) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "a malformed WINDOW_UPDATE");
    const increment = payload.readUInt32BE(0) & MAX_WINDOW;
    if (streamId === 0) {
      if (increment === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "a WINDOW_UPDATE of 0");
      if (this.sendWindow + increment > MAX_WINDOW) {
        throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "the connection's window above 2^31-1");
      }
      this.sendWindow += increment;
    } else {
      const stream = this._streamFor(streamId, "WINDOW_UPDATE");
      if (stream === null) return;
      if (increment === 0 || stream.sendWindow + increment > MAX_WINDOW) {
        const code = increment === 0 ? ErrorCode.PROTOCOL_ERROR : ErrorCode.FLOW_CONTROL_ERROR;
        stream.close(code);
        stream.handler.reset(code);
        return;
      }
      stream.sendWindow += increment;
    }
    this._flush();
  }

  /** The connection is over: every stream still open or waiting is lost. */
  _end(error) {
    if (this.ended) return;
    this.ended = true;
    if (!this.socket.writableEnded) this.socket.destroy();
    this.owner.closed(error);
    const lost = [...this.waiting, ...this.streams.values()];
    this.waiting = [];
    for (const stream of lost) {
      this._forget(stream);
      stream.handler.lost();
    }
  }
}

/**
 * Open an HTTP/2 connection on `socket` (connecting or connected).
 * @returns {Session}
 */
function connect(socket, owner) {
  return new Session(socket, owner);
}

module.exports = { ErrorCode, connect };
