"use strict";
// A fake daemon for the client's unit tests: a real grpc-js server on a Unix socket serving
// the real contract, whose tools script the situations the client must handle. (The
// end-to-end tests in tests/e2e/ run the client against the real daemon.)

const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { EventEmitter, once } = require("node:events");
const grpc = require("@grpc/grpc-js");
const { packageDefinition } = require("../lib/proto");

const TOKEN = "tb1.fake.secret";

function result(callId, value) {
  return { call_id: callId, response: { result_json: Buffer.from(JSON.stringify(value)) } };
}

class FakeDaemon extends EventEmitter {
  constructor() {
    super();
    this.streamsOpened = 0;
    this.streamsEnded = 0;
    this.requests = [];
    this._held = [];
    this._server = new grpc.Server();
    const { ToolBridgeService } = grpc.loadPackageDefinition(packageDefinition()).toolbridge.v1;
    this._server.addService(ToolBridgeService.service, {
      CallTool: (call, callback) => callback({ code: grpc.status.UNIMPLEMENTED }),
      CallToolStream: (stream) => this._stream(stream),
      ListTools: (call, callback) => this._listTools(call, callback),
    });
  }

  /** Serve on a Unix socket in a fresh directory; resolves to `unix:<path>`. */
  async start() {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), "inngest-tools-test-"));
    this.address = `unix:${path.join(this.dir, "bridge.sock")}`;
    await new Promise((resolve, reject) =>
      this._server.bindAsync(this.address, grpc.ServerCredentials.createInsecure(), (error) =>
        error ? reject(error) : resolve(),
      ),
    );
    return this.address;
  }

  stop() {
    this._server.forceShutdown();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  _authorized(call) {
    return call.metadata.get("x-toolbridge-token")[0] === TOKEN;
  }

  _stream(stream) {
    if (!this._authorized(stream)) {
      stream.emit("error", { code: grpc.status.UNAUTHENTICATED, details: "missing, unknown, expired or revoked token" });
      return;
    }
    this.streamsOpened += 1;
    this.emit("stream-opened", stream);
    stream.on("data", (request) => {
      this.requests.push(request);
      this._answer(stream, request);
    });
    stream.on("end", () => {
      this.streamsEnded += 1;
      this.emit("stream-ended");
      if (!stream.destroyed) stream.end();
    });
  }

  _answer(stream, request) {
    const { call_id: callId, call } = request;
    const args = call.positional_arguments_json.length ? JSON.parse(call.positional_arguments_json) : [];
    switch (call.tool_name) {
      case "echo":
        stream.write(result(callId, args));
        break;
      case "hold": // answered when "release" is called, after it
        this._held.push(callId);
        this.emit("held", callId);
        break;
      case "approval": // says the call waits for a person, then is held like "hold"
        stream.write({
          call_id: callId,
          waiting: { request_id: "apr_1", kind: "approval", summary: "approval()", expires_at_ms: 1 },
        });
        this._held.push(callId);
        this.emit("held", callId);
        break;
      case "release":
        stream.write(result(callId, "released"));
        for (const held of this._held.splice(0)) stream.write(result(held, "held"));
        break;
      case "fail":
        stream.write({
          call_id: callId,
          response: { error: { type: "Boom", message: "it failed", retryable: true, error_id: "err_1" } },
        });
        break;
      case "strict": {
        // As the real daemon does: a lone surrogate, which JSON.stringify sends escaped, is
        // refused under the call's id, and the stream goes on.
        const raw = Buffer.from(call.positional_arguments_json).toString("latin1");
        this.lastRawArguments = raw;
        if (/\\ud[89a-f][0-9a-f]{2}/i.test(raw) && !/\\ud[89ab][0-9a-f]{2}\\ud[c-f][0-9a-f]{2}/i.test(raw)) {
          const message = "arguments: a JSON string holds a lone surrogate, which is not valid Unicode";
          stream.write({ call_id: callId, status: { code: grpc.status.INVALID_ARGUMENT, message } });
        } else {
          stream.write(result(callId, args));
        }
        break;
      }
      case "breakStream":
        stream.emit("error", { code: grpc.status.UNAVAILABLE, details: "the daemon went away" });
        break;
      case "endStream":
        stream.end();
        break;
      default:
        stream.write({ call_id: callId, status: { code: grpc.status.NOT_FOUND, message: `no tool named '${call.tool_name}'` } });
    }
  }

  _listTools(call, callback) {
    if (!this._authorized(call)) {
      callback({ code: grpc.status.UNAUTHENTICATED, details: "missing, unknown, expired or revoked token" });
      return;
    }
    this.lastFormat = call.request.format;
    const definition = { name: "echo", description: "Echo", input_schema: { type: "object" } };
    callback(null, { tools: [{ name: "echo", definition_json: Buffer.from(JSON.stringify(definition)) }] });
  }

  /** Wait for an event, failing after `ms` instead of hanging the test run. */
  async next(event, ms = 5000) {
    return once(this, event, { signal: AbortSignal.timeout(ms) });
  }
}

module.exports = { FakeDaemon, TOKEN };
