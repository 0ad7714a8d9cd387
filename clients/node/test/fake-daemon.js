"use strict";
// A fake daemon for the client's unit tests: a real grpc-js server on a Unix socket serving
// the real contract, whose tools script the situations the client must handle. (The
// end-to-end tests in tests/e2e/ run the client against the real daemon.)

const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { EventEmitter, once } = require("node:events");
const grpc = require("@grpc/grpc-js");
const proto = require("../lib/proto");

const TOKEN = "tb1.fake.secret";

/** A grpc-js method definition of the service, its messages encoded by lib/proto.js. */
function methodDefinition(method, requestSchema, responseSchema) {
  return {
    path: `/${proto.ToolBridgeService.typeName}/${method.name}`,
    requestStream: method.methodKind === "client_streaming" || method.methodKind === "bidi_streaming",
    responseStream: method.methodKind === "server_streaming" || method.methodKind === "bidi_streaming",
    requestSerialize: (message) => proto.encode(requestSchema, message),
    requestDeserialize: (bytes) => proto.decode(requestSchema, bytes),
    responseSerialize: (message) => proto.encode(responseSchema, message),
    responseDeserialize: (bytes) => proto.decode(responseSchema, bytes),
  };
}

/** The service as grpc-js serves it: the real contract, from the generated code. */
function serviceDefinition() {
  const { method } = proto.ToolBridgeService;
  return {
    CallTool: methodDefinition(method.callTool, method.callTool.input, method.callTool.output),
    CallToolStream: methodDefinition(method.callToolStream, proto.CallToolStreamRequestSchema, proto.CallToolStreamResponseSchema),
    ListTools: methodDefinition(method.listTools, proto.ListToolsRequestSchema, proto.ListToolsResponseSchema),
  };
}

/** A CallToolStreamResponse answering `callId` with the JSON of `value`. */
function result(callId, value) {
  return response(callId, { outcome: { case: "resultJson", value: Buffer.from(JSON.stringify(value)) } });
}

/** A CallToolStreamResponse carrying the CallToolResponse `value`. */
function response(callId, value) {
  return { callId: BigInt(callId), answer: { case: "response", value } };
}

/** A CallToolStreamResponse refusing `callId` with a gRPC status. */
function refusal(callId, code, message) {
  return { callId: BigInt(callId), answer: { case: "status", value: { code, message } } };
}

/** The largest message a FakeDaemon reads unless told otherwise (the real one says ~257 KiB). */
const BATCH_BYTES = 64 * 1024;

/** The answers to one message's calls: sent together to a client that reads batches. */
class Answers {
  constructor(stream, batches, sent) {
    this.stream = stream;
    this._batches = batches;
    this._sent = sent;
    this._queue = [];
  }

  write(answer) {
    if (this._batches) this._queue.push(answer);
    else this._send([answer]);
  }

  flush() {
    if (this._queue.length > 0) this._send(this._queue.splice(0));
  }

  _send([first, ...more]) {
    if (this.stream.destroyed) return;
    this._sent.push(1 + more.length);
    this.stream.write(more.length > 0 ? { ...first, more } : first);
  }
}

class FakeDaemon extends EventEmitter {
  /**
   * @param {{ batchBytes?: number | null }} [options] the batch size it announces to a client
   *   that asks (`x-toolbridge-batches: 1`), or null to announce nothing, as an older daemon.
   *   A daemon that announced answers a message's calls in one message (the rest in `more`).
   */
  constructor({ batchBytes = BATCH_BYTES } = {}) {
    super();
    this.batchBytes = batchBytes;
    this.streamsOpened = 0;
    this.streamsEnded = 0;
    /** Every call received, batched or not, in order. */
    this.requests = [];
    /** Each message received: { calls, bytes } (calls: how many it carried). */
    this.messages = [];
    /** Each message sent on a stream: how many answers it carried. */
    this.answerMessages = [];
    /** Per stream opened: the x-toolbridge-batches the client sent ("" for none). */
    this.asked = [];
    this._held = [];
    this._sizes = new WeakMap();
    this._server = new grpc.Server();
    // The stream's deserializer also notes each message's size, which the decoded object lacks.
    const definition = serviceDefinition();
    const streamMethod = definition.CallToolStream;
    const service = {
      ...definition,
      CallToolStream: {
        ...streamMethod,
        requestDeserialize: (buffer) => {
          const request = streamMethod.requestDeserialize(buffer);
          this._sizes.set(request, buffer.length);
          return request;
        },
      },
    };
    this._server.addService(service, {
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
    const asked = stream.metadata.get("x-toolbridge-batches")[0] ?? "";
    this.asked.push(asked);
    const batches = asked === "1" && this.batchBytes !== null;
    if (batches) {
      const metadata = new grpc.Metadata();
      metadata.set("x-toolbridge-batch-bytes", String(this.batchBytes));
      stream.sendMetadata(metadata);
    }
    this.emit("stream-opened", stream);
    stream.on("data", (message) => {
      const calls = [message, ...message.more];
      this.messages.push({ calls: calls.length, bytes: this._sizes.get(message) });
      if (!batches && message.more.length > 0) {
        stream.emit("error", { code: grpc.status.INVALID_ARGUMENT, details: "a batch to a daemon that reads none" });
        return;
      }
      const answers = new Answers(stream, batches, this.answerMessages);
      if (batches && this._sizes.get(message) > this.batchBytes) {
        // A call alone may be larger: it is refused, and only it. A batch may not: the
        // stream fails, with every call on it (what a client that packed too much gets).
        if (calls.length > 1) {
          stream.emit("error", { code: grpc.status.RESOURCE_EXHAUSTED, details: "a batch larger than announced" });
          return;
        }
        this.requests.push(message);
        answers.write(refusal(message.callId, grpc.status.RESOURCE_EXHAUSTED, "the call is larger than the daemon reads"));
        answers.flush();
        return;
      }
      for (const request of calls) {
        this.requests.push(request);
        this._answer(answers, request);
      }
      answers.flush();
    });
    stream.on("end", () => {
      this.streamsEnded += 1;
      this.emit("stream-ended");
      if (!stream.destroyed) stream.end();
    });
  }

  _answer(answers, request) {
    const { stream } = answers;
    const { callId, call } = request;
    const positional = Buffer.from(call.positionalArgumentsJson);
    const args = positional.length ? JSON.parse(positional) : [];
    switch (call.toolName) {
      case "echo":
        answers.write(result(callId, args));
        break;
      case "hold": // answered when "release" is called (on any stream), after it
        this._held.push({ answers, callId });
        this.emit("held", callId);
        break;
      case "approval": // says the call waits for a person, then is held like "hold"
        answers.write({
          callId,
          answer: {
            case: "waiting",
            value: { requestId: "apr_1", kind: "approval", summary: "approval()", expiresAtMs: 1n },
          },
        });
        this._held.push({ answers, callId });
        this.emit("held", callId);
        break;
      case "release":
        answers.write(result(callId, "released"));
        for (const held of this._held.splice(0)) {
          // With this message's answers when held on the same stream; alone on another.
          if (held.answers.stream === stream) answers.write(result(held.callId, "held"));
          else new Answers(held.answers.stream, false, this.answerMessages).write(result(held.callId, "held"));
        }
        break;
      case "fail":
        answers.write(
          response(callId, {
            outcome: { case: "error", value: { type: "Boom", message: "it failed", retryable: true, errorId: "err_1" } },
          }),
        );
        break;
      case "strict": {
        // As the real daemon does: a lone surrogate, which JSON.stringify sends escaped, is
        // refused under the call's id, and the stream goes on.
        const raw = positional.toString("latin1");
        this.lastRawArguments = raw;
        if (/\\ud[89a-f][0-9a-f]{2}/i.test(raw) && !/\\ud[89ab][0-9a-f]{2}\\ud[c-f][0-9a-f]{2}/i.test(raw)) {
          const message = "arguments: a JSON string holds a lone surrogate, which is not valid Unicode";
          answers.write(refusal(callId, grpc.status.INVALID_ARGUMENT, message));
        } else {
          answers.write(result(callId, args));
        }
        break;
      }
      case "breakStream":
        answers.flush();
        stream.emit("error", { code: grpc.status.UNAVAILABLE, details: "the daemon went away" });
        break;
      case "endStream":
        answers.flush();
        stream.end();
        break;
      default:
        answers.write(refusal(callId, grpc.status.NOT_FOUND, `no tool named '${call.toolName}'`));
    }
  }

  _listTools(call, callback) {
    if (!this._authorized(call)) {
      callback({ code: grpc.status.UNAUTHENTICATED, details: "missing, unknown, expired or revoked token" });
      return;
    }
    this.lastFormat = call.request.format;
    const definition = { name: "echo", description: "Echo", input_schema: { type: "object" } };
    callback(null, { tools: [{ name: "echo", definitionJson: Buffer.from(JSON.stringify(definition)) }] });
  }

  /** Wait for an event, failing after `ms` instead of hanging the test run. */
  async next(event, ms = 5000) {
    return once(this, event, { signal: AbortSignal.timeout(ms) });
  }
}

module.exports = { BATCH_BYTES, FakeDaemon, TOKEN, refusal, response, result, serviceDefinition };
