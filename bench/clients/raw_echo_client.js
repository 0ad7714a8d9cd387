// Baseline client: raw_echo_client.py's call patterns from Node, with @grpc/grpc-js alone.
//
// Usage: node raw_echo_client.js ADDRESS MODE SEQUENTIAL PER_CALLER CALLERS
// MODE is "unary" (one RPC per call) or "stream" (one bidirectional stream, calls multiplexed
// by an id, as the inngest_tools clients do). Prints the same JSON line as the tool clients.
"use strict";

const path = require("node:path");
const { createRequire } = require("node:module");
const { performance } = require("node:perf_hooks");

// grpc-js from clients/node's devDependencies (`npm ci` there, `make node-deps`): the client
// itself no longer uses it (lib/transport.js speaks HTTP/2 directly), its tests and this
// baseline do.
const grpc = createRequire(path.join(__dirname, "..", "..", "clients", "node", "package.json"))("@grpc/grpc-js");

const WARMUP = 50;
const identity = (bytes) => bytes;

function unaryEcho(client) {
  return (payload) =>
    new Promise((resolve, reject) =>
      client.makeUnaryRequest("/bench.Echo/Unary", identity, identity, payload, (error, reply) =>
        error ? reject(error) : resolve(reply),
      ),
    );
}

function streamEcho(client) {
  const call = client.makeBidiStreamRequest("/bench.Echo/Stream", identity, identity);
  const pending = new Map();
  let nextId = 1;
  call.on("data", (message) => {
    const id = Number(message.subarray(0, message.indexOf(0x3a)).toString());
    pending.get(id)(message);
    pending.delete(id);
  });
  const echo = (payload) =>
    new Promise((resolve) => {
      const id = nextId++;
      pending.set(id, resolve);
      call.write(Buffer.concat([Buffer.from(`${id}:`), payload]));
    });
  echo.close = () => call.end();
  return echo;
}

async function main(address, mode, sequential, perCaller, callers) {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  const echo = mode === "stream" ? streamEcho(client) : unaryEcho(client);
  for (let i = 0; i < WARMUP; i += 1) await echo(Buffer.from('"warm"'));
  const latencies = [];
  for (let i = 0; i < sequential; i += 1) {
    const started = performance.now();
    await echo(Buffer.from('"x"'));
    latencies.push(performance.now() - started);
  }
  const started = performance.now();
  await Promise.all(
    Array.from({ length: callers }, async () => {
      for (let i = 0; i < perCaller; i += 1) await echo(Buffer.from('"x"'));
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  echo.close?.();
  client.close();
  const report = {
    client: `raw-node-${mode}`,
    sequential_ms: latencies,
    concurrent: { callers, calls: callers * perCaller, seconds },
  };
  console.log(JSON.stringify(report));
}

const [address, mode, ...sizes] = process.argv.slice(2);
main(address, mode, ...sizes.map(Number));
