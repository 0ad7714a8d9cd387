// Benchmark client: runs inside a sandboxed command and calls the `echo` tool.
//
// Usage: node node_client.js SEQUENTIAL PER_CALLER CALLERS
// Prints one JSON line: {"client", "sequential_ms": [...], "concurrent": {"callers", "calls", "seconds"}}.
"use strict";

const { performance } = require("node:perf_hooks");
const { tools } = require("inngest_tools");

const WARMUP = 50;

async function main(sequential, perCaller, callers) {
  for (let i = 0; i < WARMUP; i += 1) await tools.echo("warm");
  const latencies = [];
  for (let i = 0; i < sequential; i += 1) {
    const started = performance.now();
    await tools.echo("x");
    latencies.push(performance.now() - started);
  }

  async function caller() {
    for (let i = 0; i < perCaller; i += 1) await tools.echo("x");
  }

  const started = performance.now();
  await Promise.all(Array.from({ length: callers }, caller));
  const seconds = (performance.now() - started) / 1000;
  const report = {
    client: "node",
    sequential_ms: latencies,
    concurrent: { callers, calls: callers * perCaller, seconds },
  };
  console.log(JSON.stringify(report));
}

main(...process.argv.slice(2, 5).map(Number));
