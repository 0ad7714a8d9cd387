"use strict";
// Batches on the call stream, against fake daemons that record every message: one that reads
// batches of at most BATCH_BYTES and answers a message's calls in one message, and one that
// never says it reads batches (an older daemon).

const assert = require("node:assert/strict");
const { after, afterEach, before, test } = require("node:test");

const { ToolError } = require("../index.js");
const client = require("../lib/client");
const proto = require("../lib/proto");
const { streamRequest } = require("../lib/wire");
const { FakeDaemon, TOKEN } = require("./fake-daemon");

const BATCH_BYTES = 1024;
// A call whose answer is never read would wait forever: fail instead.
const TIMEOUT = { timeout: 20000 };
const { batchEntryBytes, batchMessage, CallToolStreamRequestSchema: REQUEST } = proto;

let batching;
let older;

before(async () => {
  batching = new FakeDaemon({ batchBytes: BATCH_BYTES });
  older = new FakeDaemon({ batchBytes: null });
  await Promise.all([batching.start(), older.start()]);
});

after(async () => {
  client.close();
  batching.stop();
  older.stop();
});

afterEach(() => client.close());

function connectTo(daemon) {
  client.close();
  process.env.TOOLBRIDGE_ADDRESS = daemon.address;
  process.env.TOOLBRIDGE_TOKEN = TOKEN;
}

/** The messages `daemon` receives while `work` runs. */
async function messagesDuring(daemon, work) {
  const before = daemon.messages.length;
  const result = await work();
  return [result, daemon.messages.slice(before)];
}

test("a batch is the first call's bytes and the others in `more`, the size batchEntryBytes says", TIMEOUT, () => {
  const requests = [1, 2, 3].map((id) => streamRequest(id, "echo", Buffer.from(`["${"x".repeat(id * 100)}"]`), Buffer.alloc(0)));
  const encoded = requests.map((request) => proto.encode(REQUEST, request));
  const message = batchMessage(encoded);
  assert.equal(message.length, encoded[0].length + batchEntryBytes(encoded[1].length) + batchEntryBytes(encoded[2].length));
  // The bytes protobuf-es writes for the same message with `more` (canonical, as Python's).
  assert.deepEqual(message, proto.encode(REQUEST, { ...requests[0], more: requests.slice(1) }));
  const decoded = proto.decode(REQUEST, message);
  assert.deepEqual(
    [decoded, ...decoded.more].map((call) => call.callId),
    [1n, 2n, 3n],
  );
  assert.equal(batchMessage([encoded[1]]), encoded[1]);
});

test("the stream asks for batches when it opens", TIMEOUT, async () => {
  connectTo(batching);
  const opened = batching.asked.length;
  await client.tools.echo(1);
  assert.deepEqual(batching.asked.slice(opened), ["1"]);
});

test("calls made together go out in fewer messages than calls, each within the announced size", TIMEOUT, async () => {
  connectTo(batching);
  await client.tools.echo("first"); // the stream is open and the daemon has said its size
  const count = 100;
  const [values, messages] = await messagesDuring(batching, () =>
    Promise.all(Array.from({ length: count }, (_, n) => client.tools.echo(`${"x".repeat(60)}${n}`))),
  );
  assert.deepEqual(
    values,
    Array.from({ length: count }, (_, n) => [`${"x".repeat(60)}${n}`]),
  );
  assert.equal(messages.reduce((sum, message) => sum + message.calls, 0), count);
  assert.ok(messages.length < count, `${messages.length} messages for ${count} calls`);
  assert.ok(Math.max(...messages.map((message) => message.calls)) > 1);
  for (const message of messages) assert.ok(message.bytes <= BATCH_BYTES, `a message of ${message.bytes} bytes`);
  // Split at the size, not packed loosely: ~7 KB of calls in 1 KiB messages.
  const total = messages.reduce((sum, message) => sum + message.bytes, 0);
  assert.ok(messages.length <= Math.ceil(total / BATCH_BYTES) + 1, `${messages.length} messages for ${total} bytes`);
});

test("callers resumed by one batch of answers send their next calls together", TIMEOUT, async () => {
  connectTo(batching);
  await client.tools.echo("first");
  const callers = 16;
  const rounds = 10;
  const [, messages] = await messagesDuring(batching, () =>
    Promise.all(
      Array.from({ length: callers }, async (_, caller) => {
        for (let round = 0; round < rounds; round += 1) {
          assert.deepEqual(await client.tools.echo(caller, round), [caller, round]);
        }
      }),
    ),
  );
  assert.equal(messages.reduce((sum, message) => sum + message.calls, 0), callers * rounds);
  assert.ok(messages.length < callers * rounds / 4, `${messages.length} messages for ${callers * rounds} calls`);
});

test("a call larger than the announced size goes alone, and the calls beside it are answered", TIMEOUT, async () => {
  connectTo(batching);
  await client.tools.echo("first");
  const big = "y".repeat(2 * BATCH_BYTES);
  const [outcomes, messages] = await messagesDuring(batching, () =>
    Promise.allSettled([client.tools.echo(1), client.tools.echo(big), client.tools.echo(2), client.tools.echo(3)]),
  );
  assert.deepEqual(outcomes[0], { status: "fulfilled", value: [1] });
  assert.equal(outcomes[1].status, "rejected");
  assert.ok(outcomes[1].reason instanceof ToolError);
  assert.equal(outcomes[1].reason.type, "RequestTooLarge");
  assert.deepEqual(outcomes.slice(2), [
    { status: "fulfilled", value: [2] },
    { status: "fulfilled", value: [3] },
  ]);
  const large = messages.filter((message) => message.bytes > BATCH_BYTES);
  assert.deepEqual(large.map((message) => message.calls), [1]);
  assert.equal(messages.reduce((sum, message) => sum + message.calls, 0), 4);
});

test("answers that arrive batched are read, a waiting notice among them", TIMEOUT, async () => {
  connectTo(batching);
  await client.tools.echo("first");
  const sentBefore = batching.answerMessages.length;
  let approved = false;
  const held = [client.tools.hold(), client.tools.hold()];
  const approval = client.tools.approval().then((value) => {
    approved = true;
    return value;
  });
  // One message, so answered by one: the approval's waiting notice and the echo's result.
  assert.deepEqual(await client.tools.echo("beside"), ["beside"]);
  assert.equal(approved, false); // the notice is not an answer
  assert.equal(await client.tools.release(), "released");
  assert.deepEqual(await Promise.all([...held, approval]), ["held", "held", "held"]);
  const sent = batching.answerMessages.slice(sentBefore);
  assert.deepEqual(sent, [2, 4]); // [waiting, echo], then [released, held, held, held]
});

test("to a daemon that says nothing of batches, each call is its own message", TIMEOUT, async () => {
  connectTo(older);
  const opened = older.asked.length;
  await client.tools.echo("first");
  const count = 50;
  const [values, messages] = await messagesDuring(older, () =>
    Promise.all(Array.from({ length: count }, (_, n) => client.tools.echo(n))),
  );
  assert.deepEqual(values, Array.from({ length: count }, (_, n) => [n]));
  assert.deepEqual(older.asked.slice(opened), ["1"]); // asked, and was not answered
  assert.deepEqual(
    messages.map((message) => message.calls),
    Array(count).fill(1),
  );
});

test("calls still waiting to be written when the connection closes fail and are never sent", TIMEOUT, async () => {
  connectTo(batching);
  await client.tools.echo("first");
  const sent = batching.requests.length;
  // Made in this tick: they wait in the outbox for the tick's end, and the close comes first.
  const queued = [client.tools.echo("late 1"), client.tools.echo("late 2")];
  client.close();
  for (const call of queued) {
    await assert.rejects(call, (error) => error instanceof ToolError && error.type === "Unavailable");
  }
  connectTo(batching);
  assert.deepEqual(await client.tools.echo("after"), ["after"]); // a round trip: anything sent has arrived
  assert.deepEqual(
    batching.requests.slice(sent).map((request) => JSON.parse(Buffer.from(request.call.positionalArgumentsJson))),
    [["after"]],
  );
});
