// The egress door for Node's built-in fetch, which (before Node 22.21 / 24) reads no
// HTTP(S)_PROXY variable: a --require'd hook that gives fetch's own dispatcher (undici's
// Agent, the one Node bundles) a connect function that tunnels through the door with
// CONNECT. TLS to the host is then made over the tunnel, trusting NODE_EXTRA_CA_CERTS.
"use strict";
const net = require("node:net");
const tls = require("node:tls");

const proxy = process.env.HTTPS_PROXY || process.env.https_proxy;
const symbol = Symbol.for("undici.globalDispatcher.1");

function tunnel(options, callback) {
  const url = new URL(proxy);
  const port = Number(options.port) || (options.protocol === "https:" ? 443 : 80);
  const host = options.hostname;
  const auth = Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString("base64");
  const socket = net.connect(Number(url.port), url.hostname);
  let answered = false;
  let buffer = Buffer.alloc(0);
  const fail = (error) => {
    if (!answered) {
      answered = true;
      socket.destroy();
      callback(error, null);
    }
  };
  socket.once("error", fail);
  socket.on("data", function onData(chunk) {
    buffer = Buffer.concat([buffer, chunk]);
    const end = buffer.indexOf("\r\n\r\n");
    if (end < 0) return;
    socket.removeListener("data", onData);
    const status = Number(buffer.subarray(0, end).toString("latin1").split(" ")[1]);
    if (status !== 200) {
      const body = buffer.subarray(end + 4).toString("utf8").trim();
      fail(new Error(`egress door answered ${status}: ${body}`));
      return;
    }
    socket.removeListener("error", fail);
    answered = true;
    if (options.protocol !== "https:") {
      callback(null, socket);
      return;
    }
    const secure = tls.connect({ socket, servername: options.servername || host, ALPNProtocols: ["http/1.1"] });
    secure.once("secureConnect", () => callback(null, secure));
    secure.once("error", (error) => callback(error, null));
  });
  socket.write(
    `CONNECT ${host}:${port} HTTP/1.1\r\nHost: ${host}:${port}\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`,
  );
}

if (proxy && typeof globalThis.fetch === "function") {
  // Node loads fetch's undici on the first call, which makes its Agent: make one now.
  globalThis.fetch("data:,").catch(() => {});
  const current = globalThis[symbol];
  if (current && typeof current.constructor === "function") {
    globalThis[symbol] = new current.constructor({ connect: tunnel });
  }
}
