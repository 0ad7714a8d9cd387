"use strict";
// lib/h2.js, the client's own HTTP/2, against node:http2 servers (nghttp2, an independent
// implementation) set up to need what a plain exchange never does: flow control both ways,
// PING, a peer's stream limit, CONTINUATION, padding, GOAWAY refusing a stream. And against
// a bare socket that breaks the protocol, to which the client answers with GOAWAY.

const assert = require("node:assert/strict");
const fs = require("node:fs");
const http2 = require("node:http2");
const net = require("node:net");
const os = require("node:os");
const path = require("node:path");
const { once } = require("node:events");
const { after, test } = require("node:test");

const { Code } = require("../lib/grpc");
const { encodeHeaders } = require("../lib/hpack");
const { Channel } = require("../lib/transport");
const { CALL_STREAM_PATH, OK_HEADERS, ScriptedServer, callOn, grpcMessage, readMessages } = require("./scripted-server");

const TIMEOUT = { timeout: 20000 };

const cleanups = [];
after(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

async function serve(handler, options = {}) {
  const server = new ScriptedServer(handler, options);
  await server.start();
  cleanups.push(() => server.stop());
  return server;
}

function channelTo(address, maxMessageBytes = 16 * 1024 * 1024) {
  const channel = new Channel(address, { maxMessageBytes });
  cleanups.push(() => channel.close());
  return channel;
}

/** Answer each call with `reply(bytes)`'s message, once its request is read whole. */
function answering(reply, headers = {}) {
  return (stream) => {
    const received = [];
    readMessages(stream, (bytes) => received.push(Buffer.from(bytes)));
    stream.on("end", () => {
      stream.respond({ ...OK_HEADERS, ...headers }, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(grpcMessage(reply(received)));
    });
  };
}

test("flow control: a message above the daemon's windows waits for them, one above this side's is let in", TIMEOUT, async () => {
  // The server's stream window is 1 KiB: a 300 KiB request goes out only as WINDOW_UPDATEs
  // come (nghttp2 ends the connection on a single byte too many). Its 6 MiB answer is above
  // the 4 MiB this side's windows start with: it arrives only because they are reopened.
  const answer = Buffer.alloc(6 * 1024 * 1024, 7);
  const server = await serve(
    answering((received) => {
      answer.writeUInt32BE(received[0].length, 0);
      return answer;
    }),
    { settings: { initialWindowSize: 1024 } },
  );
  const request = Buffer.alloc(300 * 1024, 1);
  const { status, messages } = await callOn(channelTo(server.address), { write: request });
  assert.equal(status.code, Code.OK, status.message);
  assert.equal(messages.length, 1);
  assert.equal(messages[0].length, answer.length);
  assert.equal(messages[0].readUInt32BE(0), request.length);
  assert.ok(messages[0].subarray(4).every((byte) => byte === 7));
});

test("the daemon's PING is answered with its payload", TIMEOUT, async () => {
  let release;
  const held = new Promise((resolve) => {
    release = resolve;
  });
  const server = await serve((stream) => {
    stream.respond(OK_HEADERS, { waitForTrailers: true });
    stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
    held.then(() => stream.end());
  });
  const channel = channelTo(server.address);
  const ended = callOn(channel);
  const [session] = await server.next("session");
  const payload = Buffer.from("pingpong");
  const echoed = await new Promise((resolve, reject) => {
    session.ping(payload, (error, _duration, received) => (error ? reject(error) : resolve(received)));
  });
  assert.deepEqual(echoed, payload);
  release();
  assert.equal((await ended).status.code, Code.OK);
});

test("the daemon's stream limit: calls beyond it wait for a stream to close, then go", TIMEOUT, async () => {
  let open = 0;
  let most = 0;
  const ends = [];
  const server = await serve(
    (stream) => {
      open += 1;
      most = Math.max(most, open);
      stream.on("close", () => {
        open -= 1;
      });
      stream.respond(OK_HEADERS, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      ends.push(() => stream.end());
      server.emit("opened");
    },
    { settings: { maxConcurrentStreams: 1 } },
  );
  const channel = channelTo(server.address);
  // The first call brings the server's SETTINGS, before which no limit is known.
  const first = callOn(channel);
  await server.next("opened");
  ends.shift()();
  assert.equal((await first).status.code, Code.OK);
  const calls = [callOn(channel), callOn(channel), callOn(channel)];
  for (let index = 0; index < calls.length; index += 1) {
    await server.next("opened"); // one at a time: the next opens only once this one is ended
    assert.equal(open, 1);
    ends.shift()();
  }
  for (const call of calls) assert.equal((await call).status.code, Code.OK);
  assert.equal(most, 1);
  assert.equal(server.requests.length, 4);
});

test("headers larger than a frame go as HEADERS and CONTINUATION, both ways", TIMEOUT, async () => {
  const big = "v".repeat(40000);
  const server = await serve(answering(() => Buffer.from("ok"), { "x-big-answer": big }), {
    maxHeaderListPairs: 128,
    settings: { maxHeaderListSize: 256 * 1024 },
  });
  const { status, headers, messages } = await callOn(channelTo(server.address), { metadata: { "x-big-request": big } });
  assert.equal(status.code, Code.OK, status.message);
  assert.equal(server.requests[0]["x-big-request"], big);
  assert.equal(headers["x-big-answer"], big);
  assert.deepEqual(messages, [Buffer.from("ok")]);
});

test("padded DATA and HEADERS are read without their padding", TIMEOUT, async () => {
  const server = await serve(
    answering((received) => Buffer.concat([Buffer.from("got "), received[0]])),
    { paddingStrategy: http2.constants.PADDING_STRATEGY_MAX },
  );
  const { status, messages } = await callOn(channelTo(server.address), { write: Buffer.from("padded") });
  assert.equal(status.code, Code.OK, status.message);
  assert.deepEqual(messages, [Buffer.from("got padded")]);
});

/**
 * A bare socket server that answers the client's first bytes with `reply`, records what the
 * client sends, and says when the client has hung up.
 */
async function brokenServer(reply) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "inngest-tools-raw-"));
  const socketPath = path.join(dir, "raw.sock");
  const received = [];
  let closed;
  const hungUp = new Promise((resolve) => {
    closed = resolve;
  });
  const server = net.createServer((socket) => {
    socket.once("data", () => socket.write(reply));
    socket.on("data", (chunk) => received.push(chunk));
    socket.on("error", () => {});
    socket.on("close", () => closed());
  });
  server.listen(socketPath);
  await once(server, "listening");
  cleanups.push(() => {
    server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { address: `unix:${socketPath}`, received: () => Buffer.concat(received), hungUp };
}

function rawFrame(type, flags, streamId, payload) {
  const header = Buffer.alloc(9);
  header.writeUIntBE(payload.length, 0, 3);
  header[3] = type;
  header[4] = flags;
  header.writeUInt32BE(streamId, 5);
  return Buffer.concat([header, payload]);
}

/** The error code of the GOAWAY among `bytes` (the client's frames after its preface). */
function goawayCode(bytes) {
  let at = 24; // the preface
  while (at + 9 <= bytes.length) {
    const length = bytes.readUIntBE(at, 3);
    if (bytes[at + 3] === 7) return bytes.readUInt32BE(at + 9 + 4);
    at += 9 + length;
  }
  return null;
}

test("a daemon that breaks HTTP/2 ends the connection with GOAWAY naming the error, and the calls UNAVAILABLE", TIMEOUT, async () => {
  const cases = [
    ["a SETTINGS frame whose length is not a multiple of 6", rawFrame(4, 0, 0, Buffer.alloc(5)), 6, /malformed SETTINGS/],
    ["DATA on a stream never opened", rawFrame(0, 0, 9, Buffer.from("x")), 1, /stream 9, never opened/],
    ["a frame above the 16384 bytes allowed", rawFrame(0, 0, 1, Buffer.alloc(16385)), 6, /above the 16384/],
    ["a header block the decoder cannot read", rawFrame(1, 4, 1, Buffer.from([0x80])), 9, /index 0/],
    ["PUSH_PROMISE, turned off", rawFrame(5, 4, 1, Buffer.alloc(4)), 1, /push is turned off/],
    [
      "a header block that never ends",
      Buffer.concat([rawFrame(1, 0, 1, Buffer.alloc(16384)), ...Array(64).fill(rawFrame(9, 0, 1, Buffer.alloc(16384)))]),
      1,
      /a header block above 1048576 bytes/,
    ],
    [
      "a frame between a HEADERS and its CONTINUATION",
      Buffer.concat([rawFrame(1, 0, 1, Buffer.alloc(1)), rawFrame(6, 0, 0, Buffer.alloc(8))]),
      1,
      /interrupted/,
    ],
  ];
  for (const [what, reply, errorCode, message] of cases) {
    const server = await brokenServer(reply);
    const { status } = await callOn(channelTo(server.address));
    assert.equal(status.code, Code.UNAVAILABLE, what);
    assert.match(status.message, /broke HTTP\/2/, what);
    assert.match(status.message, message, what);
    await server.hungUp; // once the GOAWAY is written, the client closes the socket
    assert.equal(goawayCode(server.received()), errorCode, what);
  }
});

test("GOAWAY below an open stream refuses it UNAVAILABLE (never processed), and the client hangs up", TIMEOUT, async () => {
  // node:http2's server never names a stream below one it has read, so a bare socket does.
  const goaway = rawFrame(7, 0, 0, Buffer.concat([Buffer.alloc(4), Buffer.alloc(4)])); // last stream 0, NO_ERROR
  const server = await brokenServer(Buffer.concat([rawFrame(4, 0, 0, Buffer.alloc(0)), goaway]));
  const { status } = await callOn(channelTo(server.address));
  assert.equal(status.code, Code.UNAVAILABLE);
  assert.match(status.message, /RST_STREAM REFUSED_STREAM/);
  await server.hungUp; // nothing is left on the departing connection
});

test("the client sends no more DATA than the daemon's stream window, and the rest once it opens", TIMEOUT, async () => {
  // A bare server, to see each frame: it sets a 100-byte stream window, answers the call's
  // headers, and PINGs. The client writes its 1,005-byte message as the headers arrive, so
  // by the PING's ACK it has sent all the window let it: 100 bytes.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "inngest-tools-raw-"));
  const socketPath = path.join(dir, "window.sock");
  const settings = Buffer.alloc(6);
  settings.writeUInt16BE(4, 0); // SETTINGS_INITIAL_WINDOW_SIZE
  settings.writeUInt32BE(100, 2);
  const responseHeaders = encodeHeaders([
    [":status", "200"],
    ["content-type", "application/grpc"],
  ]);
  let sentBeforeAck = null;
  const fullyReceived = new Promise((resolve) => {
    const server = net.createServer((socket) => {
      let buffered = Buffer.alloc(0);
      let prefaceRead = false;
      let dataBytes = 0;
      socket.on("error", () => {});
      socket.on("data", (chunk) => {
        buffered = Buffer.concat([buffered, chunk]);
        if (!prefaceRead && buffered.length >= 24) {
          buffered = buffered.subarray(24);
          prefaceRead = true;
        }
        while (prefaceRead && buffered.length >= 9 && buffered.length >= 9 + buffered.readUIntBE(0, 3)) {
          const length = buffered.readUIntBE(0, 3);
          const [type, flags, streamId] = [buffered[3], buffered[4], buffered.readUInt32BE(5)];
          buffered = buffered.subarray(9 + length);
          if (type === 1 && streamId === 1) {
            socket.write(
              Buffer.concat([
                rawFrame(4, 0, 0, settings),
                rawFrame(1, 4, 1, responseHeaders),
                rawFrame(6, 0, 0, Buffer.from("windowed")),
              ]),
            );
          } else if (type === 0 && streamId === 1) {
            dataBytes += length;
            if (dataBytes === 1005) resolve();
          } else if (type === 6 && flags & 1) {
            sentBeforeAck = dataBytes;
            socket.write(rawFrame(8, 0, 1, Buffer.from([0, 0, 0x03, 0x89]))); // 905 more
          }
        }
      });
    });
    server.listen(socketPath);
    cleanups.push(() => {
      server.close();
      fs.rmSync(dir, { recursive: true, force: true });
    });
  });
  const channel = channelTo(`unix:${socketPath}`);
  const call = channel.call(CALL_STREAM_PATH, {}, {
    decode: (bytes) => bytes,
    onHeaders: () => call.write(Buffer.alloc(1000, 1), () => {}),
    onMessage: () => {},
    onStatus: () => {},
  });
  await fullyReceived;
  assert.equal(sentBeforeAck, 100);
});

test("a message before the response headers ends that call INTERNAL and resets it; the connection stays", TIMEOUT, async () => {
  const server = await brokenServer(Buffer.concat([rawFrame(4, 0, 0, Buffer.alloc(0)), rawFrame(0, 0, 1, grpcMessage(Buffer.from("early")))]));
  const channel = channelTo(server.address);
  const { status } = await callOn(channel);
  assert.equal(status.code, Code.INTERNAL);
  assert.match(status.message, /before its response headers/);
  assert.equal(channel.current.usable(), true); // a stream's error, not the connection's
  channel.close();
  await server.hungUp;
  const frames = [];
  const bytes = server.received();
  for (let at = 24; at + 9 <= bytes.length; at += 9 + bytes.readUIntBE(at, 3)) {
    frames.push({ type: bytes[at + 3], streamId: bytes.readUInt32BE(at + 5), payload: bytes.subarray(at + 9, at + 9 + bytes.readUIntBE(at, 3)) });
  }
  const reset = frames.find((frame) => frame.type === 3);
  assert.equal(reset.streamId, 1);
  assert.equal(reset.payload.readUInt32BE(0), 1); // PROTOCOL_ERROR
});
