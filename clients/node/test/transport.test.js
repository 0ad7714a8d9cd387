"use strict";
// lib/transport.js (and lib/grpc.js, its rules) against a node:http2 server that scripts exact
// frames, and the client on top of it where the behaviour is the client's (GOAWAY, the
// message limit, the headers).

const assert = require("node:assert/strict");
const http2 = require("node:http2");
const net = require("node:net");
const path = require("node:path");
const { once } = require("node:events");
const { after, afterEach, before, test } = require("node:test");

const { ToolError } = require("../index.js");
const client = require("../lib/client");
const { TRANSPORT_MESSAGE_LIMIT } = require("../lib/connection");
const { Code, MessageReader, parseAddress, percentDecoded } = require("../lib/grpc");
const { Channel } = require("../lib/transport");
const {
  CALL_STREAM_PATH: PATH,
  OK_HEADERS,
  ScriptedServer,
  callOn,
  grpcMessage,
  readMessages,
  result,
  serveCalls,
  written,
} = require("./scripted-server");

const TIMEOUT = { timeout: 20000 };
const { NGHTTP2_CANCEL, NGHTTP2_ENHANCE_YOUR_CALM, NGHTTP2_NO_ERROR, NGHTTP2_PROTOCOL_ERROR, NGHTTP2_REFUSED_STREAM } =
  http2.constants;

let server;
const channels = [];

before(async () => {
  server = new ScriptedServer();
  await server.start();
});

after(() => server.stop());

afterEach(() => {
  client.close();
  for (const channel of channels.splice(0)) channel.close();
});

function channel(options = {}) {
  const opened = new Channel(server.address, { maxMessageBytes: 1024 * 1024, ...options });
  channels.push(opened);
  return opened;
}

function connectTo(address) {
  client.close();
  process.env.TOOLBRIDGE_ADDRESS = address;
  process.env.TOOLBRIDGE_TOKEN = "tb1.scripted";
}

test("a message split across DATA frames and messages packed in one are read whole", TIMEOUT, async () => {
  const large = Buffer.alloc(40000, "a"); // above the 16 KiB frame size: several frames
  const small = [Buffer.from("b"), Buffer.alloc(0), Buffer.from("ccc")];
  server.handler = async (stream) => {
    stream.respond(OK_HEADERS, { waitForTrailers: true });
    stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
    const first = grpcMessage(large);
    await written(stream, first.subarray(0, 3)); // a frame that ends inside the length prefix
    await written(stream, first.subarray(3, 20000));
    await written(stream, Buffer.concat([first.subarray(20000), ...small.map((bytes) => grpcMessage(bytes))]));
    stream.end();
  };
  const { status, messages } = await callOn(channel());
  assert.deepEqual(status, { code: Code.OK, message: "OK" });
  assert.deepEqual(messages, [large, ...small]);
});

test("the message reader gives the same messages however the bytes are cut", () => {
  const payloads = [Buffer.from("first"), Buffer.alloc(0), Buffer.alloc(300, 7), Buffer.from("last")];
  const bytes = Buffer.concat(payloads.map((payload) => grpcMessage(payload)));
  for (const size of [1, 2, 4, 5, 6, 7, 64, bytes.length]) {
    const reader = new MessageReader(1024);
    const messages = [];
    for (let at = 0; at < bytes.length; at += size) {
      const { messages: completed, refusal } = reader.push(bytes.subarray(at, at + size));
      assert.equal(refusal, null);
      messages.push(...completed.map((message) => Buffer.from(message)));
    }
    assert.deepEqual(messages, payloads, `cut every ${size} bytes`);
  }
});

test("the status comes from the trailers, its message percent-decoded", TIMEOUT, async () => {
  server.handler = (stream) => {
    stream.respond(OK_HEADERS, { waitForTrailers: true });
    stream.on("wantTrailers", () =>
      stream.sendTrailers({ "grpc-status": "5", "grpc-message": "no tool named %27x%27 %E2%82%AC 100%" }),
    );
    stream.end(grpcMessage(Buffer.from("before the status")));
  };
  const { status, messages } = await callOn(channel());
  assert.deepEqual(status, { code: 5, message: "no tool named 'x' € 100%" });
  assert.deepEqual(messages, [Buffer.from("before the status")]);
  assert.equal(percentDecoded("%E2%82"), "\ufffd"); // broken UTF-8 is replaced, not thrown
});

test("a trailers-only response carries the status in its headers", TIMEOUT, async () => {
  server.handler = (stream) => {
    stream.respond({ ...OK_HEADERS, "grpc-status": "16", "grpc-message": "bad%20token" }, { endStream: true });
  };
  const { status, headers } = await callOn(channel());
  assert.deepEqual(status, { code: Code.UNAUTHENTICATED, message: "bad token" });
  assert.equal(headers, null); // no response metadata: the status was all
  // Through the client: a ToolError of the status's type.
  connectTo(server.address);
  await assert.rejects(client.tools.echo(1), { name: "ToolError", type: "Unauthenticated", message: "bad token" });
  await assert.rejects(client.definitions(), { name: "ToolError", type: "Unauthenticated" });
});

test("an HTTP status other than 200 maps to the code the gRPC spec gives it", TIMEOUT, async () => {
  const expected = new Map([
    [400, Code.INTERNAL],
    [401, Code.UNAUTHENTICATED],
    [403, Code.PERMISSION_DENIED],
    [404, Code.UNIMPLEMENTED],
    [429, Code.UNAVAILABLE],
    [502, Code.UNAVAILABLE],
    [503, Code.UNAVAILABLE],
    [504, Code.UNAVAILABLE],
    [500, Code.UNKNOWN],
    [302, Code.UNKNOWN],
  ]);
  const opened = channel();
  for (const [httpStatus, code] of expected) {
    server.handler = (stream) => {
      stream.respond({ ":status": httpStatus, "content-type": "text/plain" });
      stream.end("not gRPC");
    };
    const { status } = await callOn(opened);
    assert.deepEqual(status, { code, message: `the daemon answered with HTTP status ${httpStatus}` });
  }
  server.handler = (stream) => {
    stream.respond({ ":status": 200, "content-type": "text/html" });
    stream.end("<html>");
  };
  assert.equal((await callOn(opened)).status.code, Code.UNKNOWN);
});

test("RST_STREAM codes map to CANCELLED, UNAVAILABLE, RESOURCE_EXHAUSTED or INTERNAL", TIMEOUT, async () => {
  const expected = new Map([
    [NGHTTP2_REFUSED_STREAM, Code.UNAVAILABLE],
    [NGHTTP2_CANCEL, Code.CANCELLED],
    [NGHTTP2_ENHANCE_YOUR_CALM, Code.RESOURCE_EXHAUSTED],
    [NGHTTP2_PROTOCOL_ERROR, Code.INTERNAL],
    [NGHTTP2_NO_ERROR, Code.INTERNAL], // closed, but no status ever came
  ]);
  const opened = channel();
  const sessions = server.sessions.length;
  for (const [rstCode, code] of expected) {
    for (const afterHeaders of [false, true]) {
      server.handler = (stream) => {
        if (afterHeaders) stream.respond(OK_HEADERS);
        stream.close(rstCode);
      };
      // The client's side stays open, as the call stream's does: the reset is what closes it.
      const { status } = await callOn(opened, { end: false });
      assert.equal(status.code, code, `RST_STREAM ${rstCode}, after headers: ${afterHeaders}`);
    }
  }
  // One session outlived its streams' resets.
  assert.equal(server.sessions.length, sessions + 1);
});

test("a message above the limit is refused from its prefix, and the call reset", TIMEOUT, async () => {
  let closed;
  server.handler = (stream) => {
    closed = once(stream, "close").then(() => stream.rstCode);
    stream.respond(OK_HEADERS);
    stream.write(grpcMessage(Buffer.alloc(10))); // within the limit: read
    stream.write(grpcMessage(Buffer.alloc(2048)).subarray(0, 5)); // only the prefix of one above it
  };
  const { status, messages } = await callOn(channel({ maxMessageBytes: 1024 }));
  assert.equal(status.code, Code.RESOURCE_EXHAUSTED);
  assert.match(status.message, /2048 bytes, more than this client reads \(1024\)/);
  assert.deepEqual(messages, [Buffer.alloc(10)]);
  assert.equal(await closed, NGHTTP2_CANCEL);
});

test("the client refuses an answer above the transport limit, and nothing but that call fails", TIMEOUT, async () => {
  server.handler = (stream) =>
    serveCalls(stream, (request, reply) => {
      if (request.call.toolName === "huge") {
        const prefix = Buffer.alloc(5);
        prefix.writeUInt32BE(TRANSPORT_MESSAGE_LIMIT + 1, 1);
        stream.write(prefix); // the prefix alone: refused before 64 MiB is sent
      } else {
        reply(result(request, "small"));
      }
    });
  connectTo(server.address);
  await assert.rejects(client.tools.huge(), (error) => {
    assert.ok(error instanceof ToolError);
    assert.equal(error.type, "RequestTooLarge");
    assert.match(error.message, /more than this client reads/);
    return true;
  });
  assert.equal(await client.tools.small(), "small"); // on a new stream
});

test("a compressed message is refused: the client asked for none", TIMEOUT, async () => {
  server.handler = (stream) => {
    stream.respond({ ...OK_HEADERS, "grpc-encoding": "gzip" });
    stream.write(grpcMessage(Buffer.from("zipped?"), 1));
  };
  const { status, messages } = await callOn(channel());
  assert.equal(status.code, Code.INTERNAL);
  assert.match(status.message, /compressed/);
  assert.deepEqual(messages, []);
});

test("a connection that closes ends its calls UNAVAILABLE, and the next call connects again", TIMEOUT, async () => {
  const opened = channel();
  server.handler = (stream) => {
    stream.respond(OK_HEADERS);
    stream.write(grpcMessage(Buffer.from("one")), () => stream.session.destroy());
  };
  const sessions = server.sessions.length;
  const { status, messages } = await callOn(opened);
  assert.deepEqual(status, { code: Code.UNAVAILABLE, message: "the connection to the daemon closed" });
  assert.deepEqual(messages, [Buffer.from("one")]);
  server.handler = (stream) => stream.respond({ ...OK_HEADERS, "grpc-status": "0" }, { endStream: true });
  assert.deepEqual((await callOn(opened)).status, { code: Code.OK, message: "OK" });
  assert.equal(server.sessions.length, sessions + 2);
});

test("an address nobody serves ends the call UNAVAILABLE, naming the address", TIMEOUT, async () => {
  const address = `unix:${path.join(server.dir, "nobody.sock")}`;
  const opened = new Channel(address, { maxMessageBytes: 1024 });
  channels.push(opened);
  const { status } = await callOn(opened);
  assert.equal(status.code, Code.UNAVAILABLE);
  assert.match(status.message, /the connection to the daemon at unix:.*nobody\.sock failed: connect ENOENT/);
});

test("GOAWAY: the calls on the departing session finish there, new calls open a new session", TIMEOUT, async () => {
  const held = [];
  let departing;
  server.handler = (stream) =>
    serveCalls(stream, (request, reply) => {
      if (request.call.toolName === "hold") {
        held.push(() => reply(result(request, "held")));
      } else if (request.call.toolName === "leave") {
        // GOAWAY (last stream: this one, so that it goes on), then the answer after it.
        departing = stream;
        stream.session.goaway(NGHTTP2_NO_ERROR, stream.id);
        reply(result(request, "leaving"));
      } else {
        reply(result(request, request.call.toolName));
      }
    });
  connectTo(server.address);
  assert.equal(await client.tools.first(), "first");
  const sessions = server.sessions.length;
  const holding = client.tools.hold();
  assert.equal(await client.tools.leave(), "leaving"); // read after the GOAWAY
  assert.equal(await client.tools.after(), "after");
  assert.equal(server.sessions.length, sessions + 1); // a new session for the new call
  const ended = once(departing, "end", { signal: AbortSignal.timeout(5000) });
  held.shift()(); // answered on the old session...
  assert.equal(await holding, "held");
  await ended; // ...whose stream the client then half-closes, with nothing left on it
  assert.equal(await client.tools.again(), "again");
  assert.equal(server.sessions.length, sessions + 1);
});

test("GOAWAY with an error code ends the session's calls UNAVAILABLE; the next call connects again", TIMEOUT, async () => {
  server.handler = (stream) =>
    serveCalls(stream, (request, reply) => {
      if (request.call.toolName === "calm") stream.session.goaway(NGHTTP2_ENHANCE_YOUR_CALM, stream.id);
      else reply(result(request, request.call.toolName));
    });
  connectTo(server.address);
  await assert.rejects(client.tools.calm(), (error) => {
    assert.ok(error instanceof ToolError);
    assert.equal(error.type, "Unavailable");
    assert.equal(error.retryable, true);
    assert.match(error.message, /GOAWAY ENHANCE_YOUR_CALM/);
    return true;
  });
  assert.equal(await client.tools.after(), "after");
});

test("a message the contract cannot decode ends the call INTERNAL, and the call is reset", TIMEOUT, async () => {
  let closed;
  server.handler = (stream) => {
    closed = once(stream, "close").then(() => stream.rstCode);
    stream.respond(OK_HEADERS);
    stream.write(grpcMessage(Buffer.from([0x0a, 0x05, 0x01]))); // a field said 5 bytes long, holding 1
  };
  connectTo(server.address);
  await assert.rejects(client.tools.echo(), { name: "ToolError", type: "ProtocolError", message: /cannot decode/ });
  assert.equal(await closed, NGHTTP2_CANCEL);
});

test("the stream and ListTools carry gRPC's headers and the client's metadata", TIMEOUT, async () => {
  server.handler = (stream, headers) => {
    if (headers[":path"].endsWith("/ListTools")) {
      readMessages(stream, () => {
        stream.respond(OK_HEADERS, { waitForTrailers: true });
        stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
        stream.end(grpcMessage(Buffer.alloc(0))); // an empty ListToolsResponse: no tools
      });
    } else {
      serveCalls(stream, (request, reply) => reply(result(request, "ok")), { "x-toolbridge-batch-bytes": "4096" });
    }
  };
  connectTo(server.address);
  const seen = server.requests.length;
  assert.equal(await client.tools.echo(), "ok");
  assert.deepEqual(await client.definitions(), []);
  const [stream, list] = server.requests.slice(seen);
  for (const headers of [stream, list]) {
    assert.equal(headers[":method"], "POST");
    assert.equal(headers[":scheme"], "http");
    assert.equal(headers["content-type"], "application/grpc");
    assert.equal(headers.te, "trailers");
    assert.equal(headers["x-toolbridge-token"], "tb1.scripted");
  }
  assert.equal(stream[":path"], PATH);
  assert.equal(stream["x-toolbridge-batches"], "1");
  assert.equal(list[":path"], "/toolbridge.v1.ToolBridgeService/ListTools");
  assert.equal(list["x-toolbridge-batches"], undefined);
});

test("addresses: unix:/abs, unix:///abs, unix:relative and host:port all connect", TIMEOUT, async () => {
  server.handler = (stream) => stream.respond({ ...OK_HEADERS, "grpc-status": "0" }, { endStream: true });
  const relative = path.relative(process.cwd(), server.socket);
  for (const address of [`unix:${server.socket}`, `unix://${server.socket}`, `unix:${relative}`]) {
    const opened = new Channel(address, { maxMessageBytes: 1024 });
    channels.push(opened);
    assert.deepEqual((await callOn(opened)).status, { code: Code.OK, message: "OK" }, address);
  }
  // TCP: the same server's handler behind a loopback port.
  const tcp = net.createServer((socket) => server._server.emit("connection", socket));
  tcp.listen(0, "127.0.0.1");
  await once(tcp, "listening");
  try {
    const opened = new Channel(`127.0.0.1:${tcp.address().port}`, { maxMessageBytes: 1024 });
    channels.push(opened);
    assert.deepEqual((await callOn(opened)).status, { code: Code.OK, message: "OK" });
  } finally {
    tcp.close();
  }
  assert.deepEqual(parseAddress("[::1]:7070"), { host: "::1", port: 7070, authority: "[::1]:7070", tls: false });
  assert.deepEqual(parseAddress("tls://[::1]:7070"), { host: "::1", port: 7070, authority: "[::1]:7070", tls: true });
  assert.deepEqual(parseAddress("tls://daemon.internal:443"), { host: "daemon.internal", port: 443, authority: "daemon.internal:443", tls: true });
  for (const bad of ["", "unix:", "unix://relative", "localhost", "host:0", "host:65536", "dns:///host:1", "tls://", "tls://unix:/a.sock", "tls://host"]) {
    assert.throws(() => parseAddress(bad), TypeError, JSON.stringify(bad));
  }
});

/** A scripted server with node:http2 `options`, stopped after the test. */
async function serverWith(handler, options, t) {
  const scripted = new ScriptedServer(handler, options);
  await scripted.start();
  t.after(() => scripted.stop());
  return scripted;
}

test("the daemon's stream limit: calls beyond it wait for a stream to close, then go", TIMEOUT, async (t) => {
  let open = 0;
  let most = 0;
  const ends = [];
  const limited = await serverWith(
    (stream) => {
      open += 1;
      most = Math.max(most, open);
      stream.on("close", () => {
        open -= 1;
      });
      stream.respond(OK_HEADERS, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      ends.push(() => stream.end());
      limited.emit("opened");
    },
    { settings: { maxConcurrentStreams: 1 } },
    t,
  );
  const opened = new Channel(limited.address, { maxMessageBytes: 1024 });
  channels.push(opened);
  // The first call brings the server's SETTINGS, before which no limit is known.
  const first = callOn(opened);
  await limited.next("opened");
  ends.shift()();
  assert.equal((await first).status.code, Code.OK);
  const calls = [callOn(opened), callOn(opened), callOn(opened)];
  for (let index = 0; index < calls.length; index += 1) {
    await limited.next("opened"); // one at a time: the next opens only once this one is ended
    assert.equal(open, 1);
    ends.shift()();
  }
  for (const call of calls) assert.equal((await call).status.code, Code.OK);
  assert.equal(most, 1);
  assert.equal(limited.requests.length, 4);
});

test("flow control: a message above the daemon's windows waits for them, an answer above this side's comes in", TIMEOUT, async (t) => {
  // The server's stream window is 1 KiB: a 300 KiB request goes out only as WINDOW_UPDATEs
  // come. Its 6 MiB answer is above the 4 MiB this side's windows start with: it arrives only
  // because they are reopened as it is read.
  const answer = Buffer.alloc(6 * 1024 * 1024, 7);
  const windowed = await serverWith(
    (stream) => {
      stream.respond(OK_HEADERS, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      readMessages(stream, (received) => {
        answer.writeUInt32BE(received.length, 0);
        stream.end(grpcMessage(answer));
      });
    },
    { settings: { initialWindowSize: 1024 } },
    t,
  );
  const request = Buffer.alloc(300 * 1024, 1);
  const opened = new Channel(windowed.address, { maxMessageBytes: 8 * 1024 * 1024 });
  channels.push(opened);
  const { status, messages } = await callOn(opened, { write: request });
  assert.equal(status.code, Code.OK, status.message);
  assert.equal(messages.length, 1);
  assert.equal(messages[0].length, answer.length);
  assert.equal(messages[0].readUInt32BE(0), request.length);
  assert.ok(messages[0].subarray(4).every((byte) => byte === 7));
});
