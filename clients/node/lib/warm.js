"use strict";
// A warm sandbox's first stage: `node lib/warm.js` loads the client, the snippet runner and
// the TypeScript compiler, then waits on stdin for one assignment, a JSON line
// {"env": {...}, "argv": [...]}. It makes that environment the process's own (the command's
// token reaches it only here) and runs the snippet as `node runner.js ARGV` would. The
// daemon gives each warm sandbox one assignment at most, then discards it; stdin closed
// without one ends it quietly.
//
// Like runner.js, this file never names ES module syntax: register.js then adds no resolve
// hook, as for a cold snippet.

const fs = require("node:fs");
const path = require("node:path");

const RUNNER = path.join(__dirname, "..", "runner.js");
const { preload, start } = require(RUNNER);
const { load } = require("./loader");

preload();

/** The first line on stdin, read without blocking the event loop ("" at end of input). */
function readLine(done) {
  const chunks = [];
  const buffer = Buffer.alloc(65536);
  const next = () =>
    fs.read(0, buffer, 0, buffer.length, null, (error, count) => {
      if (error) {
        if (error.code === "EAGAIN") return setTimeout(next, 10); // a non-blocking stdin
        throw error;
      }
      const chunk = buffer.subarray(0, count);
      const end = chunk.indexOf(10);
      chunks.push(Buffer.from(end < 0 ? chunk : chunk.subarray(0, end)));
      if (count === 0 || end >= 0) return done(Buffer.concat(chunks).toString("utf8"));
      next();
    });
  next();
}

// A first call against a stand-in daemon on a private socket (lib/warmup.js) compiles what a
// command's first call runs: 10-30 ms of a snippet's call otherwise. It leaves nothing behind
// (no connection, no file, the environment as it was).
load(path.join(__dirname, "warmup.js"))
  .warmUp()
  .then(
    () => readLine(run),
    () => readLine(run), // only slower for it
  );

function run(line) {
  if (line.trim() === "") process.exit(0); // let go unused
  const assignment = JSON.parse(line);
  for (const name of Object.keys(process.env)) delete process.env[name];
  Object.assign(process.env, assignment.env);
  process.argv = [process.argv[0], RUNNER, ...assignment.argv];
  start(assignment.argv);
}
