"use strict";
// A daemon that abuses HTTP/2, from a bare socket that writes the frames by hand (no HTTP/2
// server library sends these): the client fails the connection cleanly, with a clear error and
// bounded memory. Both were found in the hand-written HTTP/2 this client had before node:http2:
// a CONTINUATION flood was held in full (the heap grew ~210 MB for 1,000,000 empty frames) and
// a SETTINGS change could push a stream's window past 2^31-1 unnoticed.

const assert = require("node:assert/strict");
const fs = require("node:fs");
const net = require("node:net");
const os = require("node:os");
const path = require("node:path");
const { once } = require("node:events");
const { after, afterEach, test } = require("node:test");

const client = require("../lib/client");

const TIMEOUT = { timeout: 60000 };
const PREFACE_BYTES = 24;
const [DATA, HEADERS, SETTINGS, GOAWAY, WINDOW_UPDATE, CONTINUATION] = [0, 1, 4, 7, 8, 9];
const FLOW_CONTROL_ERROR = 3;
/** HPACK for `:status: 200`: the static table's entry 8, indexed. */
const STATUS_200 = Buffer.from([0x88]);

const cleanups = [];
afterEach(() => client.close());
after(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function rawFrame(type, flags, streamId, payload = Buffer.alloc(0)) {
  const header = Buffer.alloc(9);
  header.writeUIntBE(payload.length, 0, 3);
  header[3] = type;
  header[4] = flags;
  header.writeUInt32BE(streamId, 5);
  return Buffer.concat([header, payload]);
}

function setting(id, value) {
  const payload = Buffer.alloc(6);
  payload.writeUInt16BE(id, 0);
  payload.writeUInt32BE(value, 2);
  return payload;
}

/**
 * A bare socket server: `onFrame(socket, frame)` for each frame the client sends after its
 * preface; resolves `closed` when the client hangs up, and keeps the frames.
 */
async function rawServer(onFrame) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "inngest-tools-abuse-"));
  const socketPath = path.join(dir, "abuse.sock");
  const frames = [];
  let hungUp;
  const closed = new Promise((resolve) => {
    hungUp = resolve;
  });
  const server = net.createServer((socket) => {
    let buffered = Buffer.alloc(0);
    let prefaceRead = false;
    socket.on("error", () => {});
    socket.on("close", () => hungUp());
    socket.write(rawFrame(SETTINGS, 0, 0));
    socket.on("data", (chunk) => {
      buffered = Buffer.concat([buffered, chunk]);
      if (!prefaceRead && buffered.length >= PREFACE_BYTES) {
        buffered = buffered.subarray(PREFACE_BYTES);
        prefaceRead = true;
      }
      while (prefaceRead && buffered.length >= 9 && buffered.length >= 9 + buffered.readUIntBE(0, 3)) {
        const length = buffered.readUIntBE(0, 3);
        const frame = { type: buffered[3], streamId: buffered.readUInt32BE(5), payload: buffered.subarray(9, 9 + length) };
        buffered = buffered.subarray(9 + length);
        frames.push(frame);
        onFrame(socket, frame);
      }
    });
  });
  server.listen(socketPath);
  await once(server, "listening");
  cleanups.push(() => {
    server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { address: `unix:${socketPath}`, frames, closed };
}

function connectTo(address) {
  client.close();
  process.env.TOOLBRIDGE_ADDRESS = address;
  process.env.TOOLBRIDGE_TOKEN = "tb1.abuse";
}

test("a CONTINUATION flood: the client hangs up early, fails the call with a clear error, and holds little", TIMEOUT, async () => {
  const FLOOD = 1_000_000; // 9 MB of empty CONTINUATION frames after a HEADERS that never ends
  const BATCH = 10_000;
  let written = 0;
  let stopped = false;
  const server = await rawServer(async (socket, { type, streamId }) => {
    if (type !== HEADERS) return;
    socket.write(rawFrame(HEADERS, 0, streamId, STATUS_200)); // no END_HEADERS: a block that goes on
    const batch = Buffer.concat(Array.from({ length: BATCH }, () => rawFrame(CONTINUATION, 0, streamId)));
    socket.on("close", () => {
      stopped = true;
    });
    while (!stopped && written < FLOOD) {
      written += BATCH;
      if (socket.write(batch)) continue;
      try {
        await Promise.race([once(socket, "drain"), once(socket, "close")]);
      } catch {
        break; // EPIPE: the client has hung up
      }
    }
  });
  const heapBefore = process.memoryUsage().heapUsed;
  connectTo(server.address);
  await assert.rejects(client.tools.echo("x"), (error) => {
    assert.equal(error.name, "ToolError");
    assert.equal(error.type, "Unavailable");
    assert.match(error.message, new RegExp(`^the connection to the daemon at ${server.address} failed: .*CONTINUATION`, "i"));
    assert.doesNotMatch(error.message, /\n/);
    return true;
  });
  await server.closed;
  assert.ok(written < FLOOD, `the client read the whole flood (${written} frames) before hanging up`);
  const grown = process.memoryUsage().heapUsed - heapBefore;
  assert.ok(grown < 32 * 1024 * 1024, `the heap grew ${grown} bytes`);
});

test("a SETTINGS change that pushes a stream's window past 2^31-1 ends the connection with FLOW_CONTROL_ERROR", TIMEOUT, async () => {
  const MAX_WINDOW = 2 ** 31 - 1;
  const server = await rawServer((socket, { type, streamId, payload }) => {
    if (type !== DATA) return;
    // The call's message has taken its bytes from the stream's send window (65,535 to start):
    // this brings it to 2^31-1, the most it may be.
    const increment = Buffer.alloc(4);
    increment.writeUInt32BE(MAX_WINDOW - 65535 + payload.length, 0);
    socket.write(
      Buffer.concat([
        rawFrame(WINDOW_UPDATE, 0, streamId, increment),
        rawFrame(SETTINGS, 0, 0, setting(0x4, 65536)), // INITIAL_WINDOW_SIZE +1: the window would be 2^31
      ]),
    );
  });
  connectTo(server.address);
  await assert.rejects(client.tools.echo("x"), (error) => {
    assert.equal(error.name, "ToolError");
    assert.equal(error.type, "Unavailable");
    assert.match(error.message, new RegExp(`^the connection to the daemon at ${server.address} failed: `));
    assert.doesNotMatch(error.message, /\n/);
    return true;
  });
  await server.closed;
  const goaway = server.frames.find((frame) => frame.type === GOAWAY);
  assert.ok(goaway !== undefined, "the client sent no GOAWAY");
  assert.equal(goaway.payload.readUInt32BE(4), FLOW_CONTROL_ERROR);
  assert.ok(!server.frames.some((frame) => frame.type === DATA && frame.payload.length > 65535));
});
