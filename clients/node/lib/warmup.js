"use strict";
// The calls the client's code cache is built from (lib/loader.js): against a stand-in daemon,
// a node:http2 server on a private Unix socket that answers every call with `null`, the
// client makes what a command's first calls make (one call, calls batched together, the
// definitions), so their functions are compiled when the cache is written. Used by
// `node runner.js --build-cache`, and by a warm sandbox before it is given a command
// (lib/warm.js), when no command's token or address is in its environment.

const fs = require("node:fs");
const http2 = require("node:http2");
const os = require("node:os");
const path = require("node:path");
const { once } = require("node:events");

const client = require("./client");
const { MessageReader, frame } = require("./grpc");
const proto = require("./proto");

const BATCH_BYTES = 64 * 1024;

function standIn() {
  const server = http2.createServer();
  server.on("stream", (stream, headers) => {
    const unary = headers[":path"] === proto.PATHS.ListTools;
    stream.respond(
      { ":status": 200, "content-type": "application/grpc", "x-toolbridge-batch-bytes": String(BATCH_BYTES) },
      { waitForTrailers: true },
    );
    stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
    const reader = new MessageReader(BATCH_BYTES);
    stream.on("data", (chunk) => {
      for (const message of reader.push(chunk).messages) {
        if (unary) {
          stream.write(frame(proto.encode(proto.ListToolsResponseSchema, { tools: [] })));
          continue;
        }
        const request = proto.decode(proto.CallToolStreamRequestSchema, message);
        const answers = [request, ...request.more].map((call) => ({
          callId: call.callId,
          answer: {
            case: "response",
            value: { outcome: { case: "resultJson", value: Buffer.from("null") }, stepKey: `warm-up/${call.call.toolName}` },
          },
        }));
        const [first, ...more] = answers;
        stream.write(frame(proto.encode(proto.CallToolStreamResponseSchema, { ...first, more })));
      }
    });
    stream.on("end", () => stream.end());
  });
  return server;
}

/** Make a command's first calls against a stand-in daemon, and leave nothing behind. */
async function warmUp() {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "inngest-tools-warm-up-"));
  const socket = path.join(directory, "daemon.sock");
  const server = standIn();
  const saved = { address: process.env.TOOLBRIDGE_ADDRESS, token: process.env.TOOLBRIDGE_TOKEN };
  try {
    server.listen(socket);
    await once(server, "listening");
    process.env.TOOLBRIDGE_ADDRESS = `unix:${socket}`;
    process.env.TOOLBRIDGE_TOKEN = "tb1.warm-up";
    await client.tools.first("an argument", { and: ["named", 1] });
    await Promise.all([client.tools.second(), client.tools.third()]);
    await client.definitions();
  } finally {
    client.close();
    server.close();
    for (const [name, value] of Object.entries({ TOOLBRIDGE_ADDRESS: saved.address, TOOLBRIDGE_TOKEN: saved.token })) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
    fs.rmSync(directory, { recursive: true, force: true });
  }
}

module.exports = { warmUp };
