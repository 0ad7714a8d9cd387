"use strict";
// A lost connection's calls go again, as in the Python client: under the connection's session
// id (`x-toolbridge-session`) and their own call ids, on a new connection, until the reconnect
// window ends. Against a node:http2 daemon that does what the real one does with those ids: it
// runs each call once, and answers a call sent again from the one already made (joined while
// it runs, its result after). tests/hosts/ has the same over a real network cut and the real
// daemon.

const assert = require("node:assert/strict");
const { spawn } = require("node:child_process");
const fs = require("node:fs");
const http2 = require("node:http2");
const net = require("node:net");
const os = require("node:os");
const path = require("node:path");
const { EventEmitter, once } = require("node:events");
const { afterEach, beforeEach, test } = require("node:test");

const { ToolError } = require("../index.js");
const client = require("../lib/client");
const { Connection, SESSION_METADATA_KEY } = require("../lib/connection");
const { RECONNECT_WINDOW, formatSeconds, reconnectWindow } = require("../lib/reconnect");
const { decodeStreamAnswer } = require("../lib/wire");
const { ScriptedServer, result, serveCalls } = require("./scripted-server");

const TIMEOUT = { timeout: 20000 };
const TOKEN = "tb1.resend";

/** What the real daemon keeps of a stream's calls: one run per (session, call id). */
class RememberingDaemon extends EventEmitter {
  constructor() {
    super();
    /** "session/callId" -> the result's promise: the call's one run. */
    this.runs = new Map();
    /** The tools run, one entry per run. */
    this.executions = [];
    /** Every call received: { session, callId, tool, connection } (connection: its index). */
    this.received = [];
    /** label -> release function of a `hold` call running. */
    this.holding = new Map();
    this.server = new ScriptedServer((stream, headers, server) => {
      const session = headers[SESSION_METADATA_KEY] ?? "";
      const connection = server.sessions.indexOf(stream.session);
      // A daemon that reads batches says so: the client then knows a daemon answered it.
      serveCalls(stream, (request, reply) => this._call(session, connection, request, reply), {
        "x-toolbridge-batch-bytes": "65536",
      });
    });
  }

  _call(session, connection, request, reply) {
    const callId = Number(request.callId);
    const tool = request.call.toolName;
    const label = JSON.parse(Buffer.from(request.call.positionalArgumentsJson).toString() || "[null]")[0];
    this.received.push({ session, callId, tool, connection });
    // As the daemon does: a call with no session is a new call, whatever its id.
    const key = session === "" ? Symbol("no session") : `${session}/${callId}`;
    let run = this.runs.get(key);
    if (run === undefined) {
      this.executions.push(`${tool} ${label}`);
      run =
        tool === "hold"
          ? new Promise((resolve) => this.holding.set(label, () => resolve(`held ${label}`)))
          : Promise.resolve(`${tool} ${label}`);
      this.runs.set(key, run);
    }
    this.emit("received", { session, callId, tool, label });
    run.then((value) => reply(result(request, value))); // lost if its stream is gone
  }

  /** Resolves once `count` calls in all have been received. */
  async receivedCount(count) {
    while (this.received.length < count) await once(this, "received", { signal: AbortSignal.timeout(10000) });
  }

  release(label) {
    this.holding.get(label)();
  }
}

let daemon;
const opened = [];

beforeEach(async () => {
  daemon = new RememberingDaemon();
  await daemon.server.start();
});

afterEach(() => {
  client.close();
  for (const connection of opened.splice(0)) connection.close();
  daemon.server.stop();
  delete process.env.TOOLBRIDGE_RECONNECT_WINDOW;
});

function connectTo(address, window) {
  client.close();
  process.env.TOOLBRIDGE_ADDRESS = address;
  process.env.TOOLBRIDGE_TOKEN = TOKEN;
  if (window !== undefined) process.env.TOOLBRIDGE_RECONNECT_WINDOW = window;
}

function connection(address, options) {
  const made = new Connection(address, TOKEN, null, options);
  opened.push(made);
  return made;
}

async function call(on, tool, label) {
  return decodeStreamAnswer(await on.call(tool, Buffer.from(JSON.stringify([label])), Buffer.alloc(0)));
}

test("every stream of a connection carries its session id; another connection has another", TIMEOUT, async () => {
  connectTo(daemon.server.address);
  assert.equal(await client.tools.record("one"), "record one");
  client.close(); // a new connection for the next call
  connectTo(daemon.server.address);
  assert.equal(await client.tools.record("two"), "record two");
  const [first, second] = daemon.received.map((received) => received.session);
  assert.match(first, /^[0-9a-f]{32}$/);
  assert.match(second, /^[0-9a-f]{32}$/);
  assert.notEqual(first, second);
});

const LOSSES = {
  "the daemon's end of the socket closes": (session) => session.destroy(),
  "GOAWAY with an error": (session) => {
    session.goaway(http2.constants.NGHTTP2_INTERNAL_ERROR);
    session.destroy();
  },
};

for (const [how, lose] of Object.entries(LOSSES)) {
  test(`a connection lost mid-call (${how}): its calls go again under their ids, each tool runs once`, TIMEOUT, async () => {
    connectTo(daemon.server.address);
    const a = client.tools.hold("a");
    const b = client.tools.hold("b");
    await daemon.receivedCount(2);
    const [session] = daemon.server.sessions;
    lose(session);
    daemon.release("a"); // it ends while its connection is gone: its answer is lost
    await daemon.receivedCount(4); // both sent again
    daemon.release("b"); // ends after: the call sent again joined it
    assert.deepEqual(await Promise.all([a, b]), ["held a", "held b"]);
    assert.deepEqual(daemon.executions.sort(), ["hold a", "hold b"]);
    const [first, again] = [daemon.received.slice(0, 2), daemon.received.slice(2)];
    assert.deepEqual(
      again.map(({ session: id, callId }) => [id, callId]),
      first.map(({ session: id, callId }) => [id, callId]),
    );
    assert.deepEqual(
      daemon.received.map((received) => received.connection),
      [0, 0, 1, 1],
    ); // on a new connection
  });
}

test("calls made while the daemon cannot be reached wait, and go after the calls sent again", TIMEOUT, async () => {
  connectTo(daemon.server.address);
  const held = client.tools.hold("a");
  await daemon.receivedCount(1);
  await daemon.server.unreachable();
  const later = client.tools.record("later"); // made while the client connects again
  const attempts = daemon.received.length;
  await new Promise((resolve) => setTimeout(resolve, 300)); // the client is retrying meanwhile
  assert.equal(daemon.received.length, attempts); // nothing could go
  await daemon.server.reachable();
  await daemon.receivedCount(3);
  daemon.release("a");
  assert.deepEqual(await Promise.all([held, later]), ["held a", "record later"]);
  assert.deepEqual(
    daemon.received.map(({ tool, callId }) => [tool, callId]),
    [
      ["hold", 1],
      ["hold", 1],
      ["record", 2],
    ],
  );
  assert.deepEqual(daemon.executions, ["hold a", "record later"]);
});

test("a daemon unreachable for longer than the window: a retryable Unavailable that says so", TIMEOUT, async () => {
  connectTo(daemon.server.address, "0.3");
  const held = client.tools.hold("long");
  await daemon.receivedCount(1);
  const lostAt = performance.now();
  await daemon.server.unreachable();
  await assert.rejects(held, (error) => {
    assert.ok(error instanceof ToolError);
    assert.equal(error.type, "Unavailable");
    assert.equal(error.retryable, true);
    assert.ok(error.message.startsWith(`the daemon at ${daemon.server.address} was unreachable for 0.3 s (`), error.message);
    assert.ok(error.message.endsWith("); the call's outcome, if it ran, is in the daemon's journal"), error.message);
    return true;
  });
  assert.ok(performance.now() - lostAt >= 250); // not before the window
  assert.deepEqual(daemon.executions, ["hold long"]);
  // The connection is whole again for the next calls once the daemon is back.
  await daemon.server.reachable();
  assert.equal(await client.tools.record("next"), "record next");
});

test("before any daemon has answered the connection, a lost one fails its calls", TIMEOUT, async () => {
  // A server that never says it reads batches (nothing a toolbridge daemon does) and drops
  // every connection: no call is sent twice.
  let streams = 0;
  daemon.server.handler = (stream) => {
    streams += 1;
    stream.session.destroy();
  };
  connectTo(daemon.server.address);
  await assert.rejects(client.tools.record("x"), { name: "ToolError", type: "Unavailable", retryable: true });
  assert.equal(streams, 1);
});

test("a script waiting for its calls to go again stays alive, and exits once answered or given up", TIMEOUT, async () => {
  const script = `
    const { tools } = require(${JSON.stringify(path.join(__dirname, "..", "index.js"))});
    tools.hold(process.argv[1]).then(
      (value) => console.log(value),
      (error) => console.log(error.type),
    );
  `;
  const run = (label, window) => {
    const env = { ...process.env, TOOLBRIDGE_ADDRESS: daemon.server.address, TOOLBRIDGE_TOKEN: TOKEN };
    env.TOOLBRIDGE_RECONNECT_WINDOW = window;
    const child = spawn(process.execPath, ["-e", script, label], { env, stdio: ["ignore", "pipe", "inherit"] });
    let stdout = "";
    child.stdout.on("data", (chunk) => {
      stdout += chunk;
    });
    return once(child, "exit").then(([code]) => ({ code, stdout }));
  };
  const answered = run("a", "60");
  await daemon.receivedCount(1);
  await daemon.server.unreachable(); // nothing but the wait for a connection keeps it alive now
  await new Promise((resolve) => setTimeout(resolve, 300));
  await daemon.server.reachable();
  await daemon.receivedCount(2);
  daemon.release("a");
  assert.deepEqual(await answered, { code: 0, stdout: "held a\n" });
  const given = run("b", "0.3");
  await daemon.receivedCount(3);
  await daemon.server.unreachable();
  assert.deepEqual(await given, { code: 0, stdout: "Unavailable\n" });
});

/**
 * A proxy in front of the daemon whose connections can go silent: bytes both ways vanish,
 * with no reset and no close for either end, as on a cut network link.
 */
async function silentProxy(target) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "inngest-tools-proxy-"));
  const socket = path.join(dir, "proxy.sock");
  const pairs = [];
  const server = net.createServer((downstream) => {
    const upstream = net.connect(target);
    const pair = { silent: false, downstream, upstream };
    pairs.push(pair);
    for (const [from, to] of [
      [downstream, upstream],
      [upstream, downstream],
    ]) {
      from.on("data", (bytes) => {
        if (!pair.silent) to.write(bytes);
      });
      from.on("error", () => {});
      from.on("close", () => {
        if (!pair.silent) to.destroy();
      });
    }
  });
  server.listen(socket);
  await once(server, "listening");
  return {
    address: `unix:${socket}`,
    pairs,
    silence: () => pairs.forEach((pair) => (pair.silent = true)),
    close: () => {
      server.close();
      for (const { downstream, upstream } of pairs) {
        downstream.destroy();
        upstream.destroy();
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

test("a connection gone silent is found by its pings, and its call goes again on a new one", TIMEOUT, async () => {
  const proxy = await silentProxy(daemon.server.socket);
  try {
    const on = connection(proxy.address, { keepalive: { time: 100, timeout: 300 } });
    assert.equal(await call(on, "record", "first"), "record first"); // the daemon has answered
    const held = call(on, "hold", "a");
    await daemon.receivedCount(2);
    proxy.silence(); // no reset: only an unanswered ping tells
    await daemon.receivedCount(3);
    daemon.release("a");
    assert.equal(await held, "held a");
    assert.equal(proxy.pairs.length, 2);
    assert.deepEqual(daemon.executions, ["record first", "hold a"]);
    assert.deepEqual(daemon.received[2].callId, daemon.received[1].callId);
    assert.deepEqual(daemon.received[2].session, daemon.received[1].session);
  } finally {
    proxy.close();
  }
});

test("a live connection answers its pings and is kept through a long call", TIMEOUT, async () => {
  const on = connection(daemon.server.address, { keepalive: { time: 50, timeout: 1000 } });
  const held = call(on, "hold", "a");
  await daemon.receivedCount(1);
  await new Promise((resolve) => setTimeout(resolve, 500)); // ten pings' worth
  daemon.release("a");
  assert.equal(await held, "held a");
  assert.equal(daemon.server.sessions.length, 1);
  assert.equal(daemon.received.length, 1);
});

test("TOOLBRIDGE_RECONNECT_WINDOW is read as the Python client reads it", () => {
  const read = (text) => reconnectWindow({ TOOLBRIDGE_RECONNECT_WINDOW: text });
  assert.equal(reconnectWindow({}), RECONNECT_WINDOW);
  assert.equal(RECONNECT_WINDOW, 60);
  assert.equal(read(""), 60);
  assert.equal(read("2.5"), 2.5);
  assert.equal(read(" 1e1 "), 10);
  assert.equal(read(".5"), 0.5);
  assert.equal(read("0"), 0);
  assert.equal(read("-3"), 0); // at least 0: never sent again
  assert.equal(read("inf"), Infinity);
  assert.equal(read("soon"), 60);
  assert.equal(read("1s"), 60);
  assert.deepEqual([1, 0.5, 60, 0.3, Infinity].map(formatSeconds), ["1", "0.5", "60", "0.3", "inf"]);
});

