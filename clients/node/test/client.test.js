"use strict";
// The client against a fake daemon (a grpc-js server: an independent gRPC implementation):
// multiplexing, errors, reconnecting, and a process's lifetime.

const assert = require("node:assert/strict");
const { spawn } = require("node:child_process");
const path = require("node:path");
const { once } = require("node:events");
const { after, afterEach, before, test } = require("node:test");

const { ToolError } = require("../index.js");
const client = require("../lib/client");
const { FakeDaemon, TOKEN } = require("./fake-daemon");

let daemon;

before(async () => {
  daemon = new FakeDaemon();
  await daemon.start();
});

after(async () => {
  client.close();
  await daemon.stop();
});

function connectTo(address, token = TOKEN) {
  client.close();
  process.env.TOOLBRIDGE_ADDRESS = address;
  process.env.TOOLBRIDGE_TOKEN = token;
}

afterEach(() => client.close());

async function rejectsWith(promise, expected) {
  await assert.rejects(promise, (error) => {
    assert.ok(error instanceof ToolError, `not a ToolError: ${error}`);
    for (const [key, value] of Object.entries(expected)) {
      if (value instanceof RegExp) assert.match(error[key], value, key);
      else assert.equal(error[key], value, key);
    }
    return true;
  });
}

test("positional arguments reach the tool and its result comes back", async () => {
  connectTo(daemon.address);
  assert.deepEqual(await client.tools.echo("cus_1", 2), ["cus_1", 2]);
  assert.deepEqual(await client.tools.echo({ id: "cus_1" }), [{ id: "cus_1" }]);
});

test("calls share one stream and their answers may come back in any order", async () => {
  connectTo(daemon.address);
  const opened = daemon.streamsOpened;
  const held = client.tools.hold();
  await daemon.next("held");
  assert.equal(await client.tools.release(), "released");
  assert.equal(await held, "held");
  const sequential = [];
  for (let i = 0; i < 5; i += 1) sequential.push(await client.tools.echo(i));
  assert.deepEqual(sequential, [[0], [1], [2], [3], [4]]);
  assert.deepEqual(await Promise.all([client.tools.echo(1), client.tools.echo(2)]), [[1], [2]]);
  assert.equal(daemon.streamsOpened, opened + 1);
});

test("a call told it waits for a person stays pending, its stream open, until answered", async () => {
  connectTo(daemon.address);
  let settled = false;
  const waiting = client.tools.approval().finally(() => {
    settled = true;
  });
  await daemon.next("held");
  const opened = daemon.streamsOpened;
  // A round trip on the same stream after the notice: the notice was read, and was no answer.
  assert.deepEqual(await client.tools.echo("beside"), ["beside"]);
  assert.equal(settled, false);
  assert.equal(daemon.streamsOpened, opened);
  assert.equal(await client.tools.release(), "released");
  assert.equal(await waiting, "held");
});

test("a tool's error rejects with a ToolError carrying its type", async () => {
  connectTo(daemon.address);
  await rejectsWith(client.tools.fail(), { type: "Boom", message: "it failed", retryable: true, errorId: "err_1" });
});

test("a refused call fails alone and the stream goes on", async () => {
  connectTo(daemon.address);
  const opened = daemon.streamsOpened;
  await rejectsWith(client.tools.nope(), { type: "ToolNotFound", message: "no tool named 'nope'" });
  assert.deepEqual(await client.tools.echo(1), [1]);
  assert.equal(daemon.streamsOpened, opened + 1);
});

// A stream that ends with calls in flight is taken for a lost connection, and its calls go
// again (test/resend.test.js); with no reconnect window they fail.
function withoutResending(run) {
  return async () => {
    process.env.TOOLBRIDGE_RECONNECT_WINDOW = "0";
    try {
      await run();
    } finally {
      delete process.env.TOOLBRIDGE_RECONNECT_WINDOW;
    }
  };
}

test("with no reconnect window, a broken stream fails its calls as retryable and the next call reconnects", withoutResending(async () => {
  connectTo(daemon.address);
  const held = client.tools.hold();
  await daemon.next("held");
  const broken = client.tools.breakStream();
  await rejectsWith(held, { type: "Unavailable", retryable: true, message: "the daemon went away" });
  await rejectsWith(broken, { type: "Unavailable", retryable: true });
  const opened = daemon.streamsOpened;
  assert.deepEqual(await client.tools.echo("again"), ["again"]);
  assert.equal(daemon.streamsOpened, opened + 1);
}));

test("with no reconnect window, a stream the daemon ends fails the calls still in flight", withoutResending(async () => {
  connectTo(daemon.address);
  await rejectsWith(client.tools.endStream(), {
    type: "Unavailable",
    retryable: true,
    message: "the connection to the daemon closed",
  });
  assert.deepEqual(await client.tools.echo(1), [1]);
}));

test("the stream stays open between calls: calls made one after another share it", async () => {
  connectTo(daemon.address);
  assert.deepEqual(await client.tools.echo(1), [1]);
  const opened = daemon.streamsOpened;
  const ended = daemon.streamsEnded;
  // A macrotask between the calls: nothing is in flight, and nothing closes the stream.
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(await client.tools.echo(2), [2]);
  assert.equal(daemon.streamsOpened, opened);
  assert.equal(daemon.streamsEnded, ended);
});

test("a wrong token fails calls and definitions with Unauthenticated", async () => {
  connectTo(daemon.address, "tb1.fake.wrong");
  await rejectsWith(client.tools.echo(1), { type: "Unauthenticated", retryable: false });
  await rejectsWith(client.definitions(), { type: "Unauthenticated" });
});

test("an address nobody serves fails with a retryable Unavailable", async () => {
  connectTo(`unix:${path.join(daemon.dir, "nobody.sock")}`);
  await rejectsWith(client.tools.echo(1), { type: "Unavailable", retryable: true });
});

test("definitions() asks for a format and parses the definitions", async () => {
  connectTo(daemon.address);
  const expected = [{ name: "echo", description: "Echo", input_schema: { type: "object" } }];
  assert.deepEqual(await client.definitions(), expected);
  assert.equal(daemon.lastFormat, 1);
  for (const [format, value] of [["openai", 2], ["openai-strict", 3], ["mcp", 4]]) {
    await client.definitions({ format });
    assert.equal(daemon.lastFormat, value);
    await client.definitions(format); // the short form
    assert.equal(daemon.lastFormat, value);
  }
  await client.definitions({});
  assert.equal(daemon.lastFormat, 1);
  await assert.rejects(client.definitions({ format: "gemini" }), { name: "TypeError", message: /unknown format "gemini"/ });
  await assert.rejects(client.definitions("gemini"), { name: "TypeError", message: /unknown format "gemini"/ });
});

test("without an address and a token, calls fail with NotConfigured", async () => {
  connectTo("", "");
  await rejectsWith(client.tools.echo(1), { type: "NotConfigured", message: /TOOLBRIDGE_ADDRESS/ });
  await rejectsWith(client.definitions(), { type: "NotConfigured" });
});

test("an address or a token the client cannot use fails with NotConfigured, naming the variable", async () => {
  connectTo("somewhere");
  await rejectsWith(client.tools.echo(1), { type: "NotConfigured", message: /^TOOLBRIDGE_ADDRESS: "somewhere" is not an address/ });
  connectTo(daemon.address, "tb1.fake\nsecret");
  await rejectsWith(client.tools.echo(1), { type: "NotConfigured", message: /^TOOLBRIDGE_TOKEN is not a token/ });
  await rejectsWith(client.definitions(), { type: "NotConfigured" });
});

test("arguments that are not JSON fail with InvalidArgument and nothing is sent", async () => {
  connectTo(daemon.address);
  const sent = daemon.requests.length;
  for (const bad of [NaN, Infinity, () => 1, Symbol("s"), 10n, { nested: [1, -Infinity] }]) {
    await rejectsWith(client.tools.echo(bad), { type: "InvalidArgument", message: /arguments must be JSON values/ });
  }
  assert.equal(daemon.requests.length, sent);
});

/** Run `script` (its `INDEX` is the client's index.js) in a Node process of its own, against the daemon. */
function runScript(script) {
  const source = script.replace("INDEX", JSON.stringify(path.join(__dirname, "..", "index.js")));
  const child = spawn(process.execPath, ["-e", source], {
    env: { ...process.env, TOOLBRIDGE_ADDRESS: daemon.address, TOOLBRIDGE_TOKEN: TOKEN },
    stdio: ["ignore", "pipe", "inherit"],
  });
  let stdout = "";
  child.stdout.on("data", (chunk) => (stdout += chunk));
  const exited = once(child, "exit", { signal: AbortSignal.timeout(20000) }).then(([code]) => ({ code, stdout }));
  return { child, exited };
}

test("a script exits by itself once its last call is answered", async () => {
  const { exited } = runScript(`
    const { tools } = require(INDEX);
    async function main() { console.log(JSON.stringify(await tools.echo("cus_1"))); }
    main();
  `);
  assert.deepEqual(await exited, { code: 0, stdout: '["cus_1"]\n' });
});

test("a script does not exit while a call is in flight, one waiting for a person included", async () => {
  // Exited early, it would print nothing (a pending promise keeps no process alive).
  const { child, exited } = runScript(`
    const { tools } = require(INDEX);
    async function main() { console.log(JSON.stringify(await Promise.all([tools.hold(), tools.approval()]))); }
    main();
  `);
  await daemon.next("held");
  await daemon.next("held");
  connectTo(daemon.address);
  assert.deepEqual(await client.tools.echo("a round trip later"), ["a round trip later"]);
  assert.equal(child.exitCode, null);
  assert.equal(await client.tools.release(), "released"); // answers the script's calls
  assert.deepEqual(await exited, { code: 0, stdout: '["held","held"]\n' });
});

test("a lone surrogate is sent escaped, its refusal comes back, and the stream serves on", async () => {
  connectTo(daemon.address);
  assert.deepEqual(await client.tools.strict("before"), ["before"]);
  const opened = daemon.streamsOpened;
  // JSON.stringify escapes it (well-formed JSON.stringify): the daemon sees it and names it,
  // instead of a U+FFFD the encoder would have put in its place.
  await rejectsWith(client.tools.strict("a\ud800b"), { type: "InvalidArgument", message: /lone surrogate/ });
  assert.equal(daemon.lastRawArguments, '["a\\ud800b"]');
  assert.deepEqual(await client.tools.strict("\ud83d\ude00"), ["\ud83d\ude00"]); // a pair is fine
  assert.deepEqual(await client.tools.strict("after"), ["after"]);
  assert.equal(daemon.streamsOpened, opened);
});

test("a tool name with a lone surrogate fails with InvalidArgument and nothing is sent", async () => {
  connectTo(daemon.address);
  const sent = daemon.requests.length;
  await rejectsWith(client.tools["ec\ud800ho"](), { type: "InvalidArgument", message: /not valid Unicode/ });
  assert.equal(daemon.requests.length, sent);
  assert.deepEqual(await client.tools.echo("\ud83d\ude00"), ["\ud83d\ude00"]);
});
