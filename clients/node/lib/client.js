"use strict";
// `tools`, `definitions` and the process's one connection, opened at the first call.

const { ToolError } = require("./errors");
const { answer: answerRecorded, current: currentReplay } = require("./replay");
const { FORMATS, decodeDefinitions, decodeStreamAnswer, encodeArguments } = require("./wire");

const ADDRESS_VARIABLE = "TOOLBRIDGE_ADDRESS";
const TOKEN_VARIABLE = "TOOLBRIDGE_TOKEN";

let connection = null;

function currentConnection() {
  if (connection !== null) return connection;
  const address = process.env[ADDRESS_VARIABLE] ?? "";
  const token = process.env[TOKEN_VARIABLE] ?? "";
  if (!address || !token) {
    throw new ToolError(
      `not connected to a toolbridge daemon: ${ADDRESS_VARIABLE} and ${TOKEN_VARIABLE} are not set; ` +
        "run this code through step.sandbox, or set them to the address and token a host minted " +
        "for this sandbox",
      { type: "NotConfigured" },
    );
  }
  // gRPC metadata is printable ASCII; HTTP/2 would refuse anything else at every call.
  if (!/^[\x20-\x7e]+$/.test(token)) {
    throw new ToolError(`${TOKEN_VARIABLE} is not a token: it holds characters no token has`, {
      type: "NotConfigured",
    });
  }
  // Loaded here, not at require time: a script that never calls a tool loads no HTTP/2.
  const { Connection } = require("./connection");
  const { reconnectWindow } = require("./reconnect");
  const { tlsSettings } = require("./tls");
  let tls;
  try {
    tls = tlsSettings(process.env, address);
  } catch (error) {
    if (!(error instanceof TypeError)) throw error;
    throw new ToolError(error.message, { type: "NotConfigured" });
  }
  try {
    connection = new Connection(address, token, tls, { reconnectWindow: reconnectWindow(process.env) });
  } catch (error) {
    if (!(error instanceof TypeError)) throw error;
    throw new ToolError(`${ADDRESS_VARIABLE}: ${error.message}`, { type: "NotConfigured" });
  }
  return connection;
}

/** Call the tool `name` with positional arguments; `tools.name(...)` is the same call. */
async function call(name, ...args) {
  // The proto codec would send U+FFFD in place of a lone surrogate: a name not asked for.
  if (/\p{Cs}/u.test(name)) {
    throw new ToolError(`the tool name ${JSON.stringify(name)} is not valid Unicode (it holds a lone surrogate)`, {
      type: "InvalidArgument",
    });
  }
  const [positional, named] = encodeArguments(args);
  const replay = currentReplay();
  const record = replay === null ? null : replay.find(name, positional);
  if (record !== null) return answerRecorded(record); // recorded by an earlier run of this command
  const answer = await currentConnection().call(name, positional, named);
  return decodeStreamAnswer(answer);
}

/**
 * The definitions of this command's tools, in a model API's format:
 * `definitions({ format: "openai" })`, or `definitions("openai")` for short.
 * @param {{ format?: "anthropic" | "openai" | "openai-strict" | "mcp" } | string} [options]
 */
async function definitions(options = {}) {
  const format = typeof options === "string" ? options : (options ?? {}).format ?? "anthropic";
  if (typeof format !== "string" || !Object.hasOwn(FORMATS, format)) {
    const known = Object.keys(FORMATS).join(", ");
    throw new TypeError(`unknown format ${JSON.stringify(format)}; use one of ${known}`);
  }
  return decodeDefinitions(await currentConnection().listTools(FORMATS[format]));
}

/** Close the connection (for tests and long-lived hosts); the next call opens a new one. */
function close() {
  if (connection !== null) {
    connection.close();
    connection = null;
  }
}

const INSPECT = Symbol.for("nodejs.util.inspect.custom");

function makeTools() {
  const callers = new Map();
  // util.inspect looks at a proxy's target, not through its traps.
  const target = Object.create(null, { [INSPECT]: { value: () => "[inngest_tools.tools]" } });
  return new Proxy(target, {
    get(_target, property) {
      if (typeof property === "symbol") return target[property];
      // Not a tool: `then` would make `tools` look like a promise to `await`.
      if (property === "then") return undefined;
      let caller = callers.get(property);
      if (caller === undefined) {
        caller = (...args) => call(property, ...args);
        Object.defineProperty(caller, "name", { value: property });
        callers.set(property, caller);
      }
      return caller;
    },
    set() {
      return false;
    },
    defineProperty() {
      return false;
    },
    deleteProperty() {
      return false;
    },
  });
}

/** `tools.name(...)` calls the host tool `name`; `tools["name"](...)` works too. */
const tools = makeTools();

module.exports = { call, close, definitions, tools };
