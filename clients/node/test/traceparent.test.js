"use strict";
// The caller's trace context on each call: `traceparent` in the CallToolRequest, from the
// active OpenTelemetry span when @opentelemetry/api resolves, else from $TRACEPARENT.

const assert = require("node:assert/strict");
const { spawn } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { once } = require("node:events");
const { after, afterEach, before, test } = require("node:test");

const client = require("../lib/client");
const { streamRequest } = require("../lib/wire");
const { FakeDaemon, TOKEN } = require("./fake-daemon");

const CLIENT = path.join(__dirname, "..", "index.js");
const FROM_ENV = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const FROM_API = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

let daemon;

before(async () => {
  daemon = new FakeDaemon();
  await daemon.start();
});

after(async () => {
  client.close();
  await daemon.stop();
});

afterEach(() => {
  client.close();
  delete process.env.TRACEPARENT;
});

function lastCall() {
  return daemon.requests[daemon.requests.length - 1].call;
}

test("the request has no traceparent field when there is no trace context", () => {
  assert.deepEqual(streamRequest(1, "echo", Buffer.alloc(0), Buffer.alloc(0)), {
    callId: 1n,
    call: { toolName: "echo" },
  });
  assert.equal(streamRequest(1, "echo", Buffer.alloc(0), Buffer.alloc(0), FROM_ENV).call.traceparent, FROM_ENV);
});

test("without @opentelemetry/api, each call carries the command's TRACEPARENT", async () => {
  process.env.TOOLBRIDGE_ADDRESS = daemon.address;
  process.env.TOOLBRIDGE_TOKEN = TOKEN;
  process.env.TRACEPARENT = FROM_ENV;
  assert.deepEqual(await client.tools.echo(1), [1]);
  assert.equal(lastCall().traceparent, FROM_ENV);
  delete process.env.TRACEPARENT;
  assert.deepEqual(await client.tools.echo(2), [2]);
  assert.equal(lastCall().traceparent, "", "no context, no traceparent");
});

// A stand-in for @opentelemetry/api with the two functions the client uses, in a script's
// own node_modules: the client must find it from the script's directory, not its own. Like
// the real API once an application registers its context manager, it sets the global.
const FAKE_API = `
let active = null;
globalThis[Symbol.for("opentelemetry.js.api.1")] = { version: "1.9.0" };
module.exports = {
  context: { active: () => active, with: (ctx, fn) => { const was = active; active = ctx; try { return fn(); } finally { active = was; } } },
  trace: { getSpanContext: (ctx) => ctx && ctx.span },
};
`;

async function runWithApi(apiSource) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "inngest-tools-otel-"));
  try {
    const api = path.join(dir, "node_modules", "@opentelemetry", "api");
    fs.mkdirSync(api, { recursive: true });
    fs.writeFileSync(path.join(api, "package.json"), JSON.stringify({ name: "@opentelemetry/api", main: "index.js" }));
    fs.writeFileSync(path.join(api, "index.js"), apiSource);
    const script = path.join(dir, "agent.js");
    fs.writeFileSync(
      script,
      `const otel = require("@opentelemetry/api");
       const { tools } = require(${JSON.stringify(CLIENT)});
       const span = { traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7", traceFlags: 1 };
       (async () => {
         await otel.context.with({ span }, () => tools.echo("inside"));
         await tools.echo("outside");
       })().catch((error) => { console.error(error); process.exit(1); });`,
    );
    const before = daemon.requests.length;
    const child = spawn(process.execPath, [script], {
      cwd: dir,
      env: { ...process.env, TOOLBRIDGE_ADDRESS: daemon.address, TOOLBRIDGE_TOKEN: TOKEN, TRACEPARENT: FROM_ENV },
      stdio: ["ignore", "inherit", "inherit"],
    });
    const [code] = await once(child, "exit", { signal: AbortSignal.timeout(20000) });
    assert.equal(code, 0);
    const calls = daemon.requests.slice(before).map((request) => request.call);
    return calls.map((call) => [JSON.parse(Buffer.from(call.positionalArgumentsJson))[0], call.traceparent]);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

test("with @opentelemetry/api resolvable, a call carries the active span, not TRACEPARENT", async () => {
  assert.deepEqual(await runWithApi(FAKE_API), [
    ["inside", FROM_API],
    ["outside", FROM_ENV],
  ]);
});

test("an API that nothing registered (no global) is not looked for: TRACEPARENT goes", async () => {
  const unregistered = FAKE_API.replace(/^globalThis\[.*$/m, "");
  assert.notEqual(unregistered, FAKE_API);
  assert.deepEqual(await runWithApi(unregistered), [
    ["inside", FROM_ENV],
    ["outside", FROM_ENV],
  ]);
});
