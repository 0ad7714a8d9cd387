"use strict";
// Client-side replay (lib/replay.js): the shared vectors (tests/vectors/replay.json, which the
// Python client runs too), and a re-run command's records answered here, each taken once.

const assert = require("node:assert/strict");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { afterEach, describe, test } = require("node:test");

const { ToolError } = require("../index.js");
const client = require("../lib/client");
const { Replay, callInput } = require("../lib/replay");
const { encodeArguments } = require("../lib/wire");

const VECTORS_FILE = path.join(__dirname, "..", "..", "..", "tests", "vectors", "replay.json");
const VECTORS = JSON.parse(fs.readFileSync(VECTORS_FILE, "utf8"));

describe("a call's input is spelled as the daemon spells it", () => {
  for (const vector of VECTORS.inputs.filter((v) => Object.keys(v.kwargs).length === 0)) {
    test(vector.name, () => {
      assert.equal(callInput(encodeArguments(vector.args)[0]), vector.input);
    });
  }
});

test("a lone surrogate has no input the daemon would take", () => {
  assert.equal(callInput(encodeArguments(["\ud800"])[0]), null);
});

/** A records file as the daemon writes it, in a fresh directory with its taken/. */
function recordsFile(calls, { maxCalls = 100, maxRequestBytes = 262144 } = {}) {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "inngest-tools-replay-"));
  fs.mkdirSync(path.join(directory, "taken"));
  const file = path.join(directory, "records.json");
  const document = { format: 1, max_calls: maxCalls, max_request_bytes: maxRequestBytes, calls };
  fs.writeFileSync(file, JSON.stringify(document));
  return { directory, file, document };
}

const ECHO_TWICE = [
  {
    tool: "echo",
    input: '["a"]',
    records: [
      { key: "agent/echo@x", result_json: '"first"' },
      { key: "agent/echo@x#2", error: { type: "Flaky", message: "no", retryable: true, error_id: "" } },
    ],
  },
];

test("the n-th matching call takes the n-th record; past the records, the daemon answers", () => {
  const { directory, document } = recordsFile(ECHO_TWICE);
  const replay = new Replay(directory, document);
  const [positional] = encodeArguments(["a"]);
  assert.equal(replay.find("echo", positional).key, "agent/echo@x");
  assert.equal(replay.find("echo", positional).key, "agent/echo@x#2");
  assert.equal(replay.find("echo", positional), null);
  assert.deepEqual(fs.readdirSync(path.join(directory, "taken")).sort(), ["0.1", "0.2"]);
});

test("an occurrence another process (or the daemon) took is skipped, never answered twice", () => {
  const { directory, document } = recordsFile(ECHO_TWICE);
  fs.writeFileSync(path.join(directory, "taken", "0.1"), "");
  const replay = new Replay(directory, document);
  assert.equal(replay.find("echo", encodeArguments(["a"])[0]).key, "agent/echo@x#2");
});

test("another tool, other arguments, a float for an int: none is a match", () => {
  const calls = [{ tool: "add", input: "[1]", records: [{ key: "k", result_json: "1" }] }];
  const { directory, document } = recordsFile(calls);
  const replay = new Replay(directory, document);
  assert.equal(replay.find("sub", encodeArguments([1])[0]), null);
  assert.equal(replay.find("add", encodeArguments([2])[0]), null);
  assert.equal(replay.find("add", encodeArguments([1.5])[0]), null);
  assert.equal(replay.find("add", encodeArguments(["1"])[0]), null);
  assert.equal(replay.find("add", encodeArguments([1])[0]).key, "k");
});

test("past max_calls or max_request_bytes the daemon answers (and refuses), not the records", () => {
  const calls = [{ tool: "echo", input: '["a"]', records: [{ key: "k", result_json: "1" }] }];
  const budget = recordsFile(calls, { maxCalls: 1 });
  const spent = new Replay(budget.directory, budget.document);
  spent.find("other", encodeArguments([1])[0]);
  assert.equal(spent.find("echo", encodeArguments(["a"])[0]), null);
  const small = recordsFile(calls, { maxRequestBytes: 5 });
  assert.equal(new Replay(small.directory, small.document).find("echo", encodeArguments(["a"])[0]), null);
});

describe("through tools, with no daemon to ask", () => {
  afterEach(() => {
    delete process.env.TOOLBRIDGE_REPLAY;
    client.close();
  });

  test("recorded results and errors come back as the daemon would give them", async () => {
    const { file } = recordsFile(ECHO_TWICE);
    process.env.TOOLBRIDGE_REPLAY = file;
    process.env.TOOLBRIDGE_ADDRESS = "unix:/nonexistent/toolbridge.sock";
    process.env.TOOLBRIDGE_TOKEN = "tb1.none.none";
    assert.equal(await client.tools.echo("a"), "first");
    await assert.rejects(client.tools.echo("a"), (error) => {
      assert.ok(error instanceof ToolError);
      assert.deepEqual([error.type, error.message, error.retryable], ["Flaky", "no", true]);
      return true;
    });
    // The third call is not recorded: it goes to the daemon, which is not there.
    await assert.rejects(client.tools.echo("a"), (error) => error.type === "Unavailable");
  });
});
