"use strict";
// The wire envelope, as pure functions: what a call is as a message and what an answer means
// (messages in protobuf-es's shape; lib/proto.js turns them into bytes). tests/vectors/wire.json
// pins both, for this client and the Python one alike. Loaded by `require("inngest_tools")`:
// nothing here loads the contract or @bufbuild/protobuf.

const { ToolError } = require("./errors");

/** Definition format name -> DefinitionFormat enum value (proto/toolbridge/v1). */
const FORMATS = Object.freeze({
  anthropic: 1,
  openai: 2,
  "openai-strict": 3,
  mcp: 4,
});

// gRPC status code -> [ToolError type, retryable], for problems the daemon reports as a status.
const STATUS_TYPES = new Map([
  [5, ["ToolNotFound", false]], // NOT_FOUND
  [16, ["Unauthenticated", false]], // UNAUTHENTICATED
  [3, ["InvalidArgument", false]], // INVALID_ARGUMENT
  [8, ["RequestTooLarge", false]], // RESOURCE_EXHAUSTED
  [14, ["Unavailable", true]], // UNAVAILABLE
]);

// RESOURCE_EXHAUSTED means two things: a call too large (final) or a command with too many
// calls in flight or streams open (try again shortly). The daemon's message names the limit.
const BUSY_LIMITS = ["(ToolOptions.max_in_flight)", "(ToolOptions.max_streams)"];

const EMPTY = Buffer.alloc(0);

/**
 * The ToolError for a gRPC status.
 * @param {number} code
 * @param {string} message
 * @param {string} [given] the ToolError type the transport gave it (a TLS failure: final).
 */
function statusError(code, message, given) {
  if (given !== undefined) return new ToolError(message, { type: given, retryable: false });
  if (code === 8 && BUSY_LIMITS.some((limit) => message.includes(limit))) {
    return new ToolError(message, { type: "TooManyCalls", retryable: true });
  }
  const [type, retryable] = STATUS_TYPES.get(code) ?? ["ProtocolError", false];
  return new ToolError(message, { type, retryable });
}

// JSON.stringify quietly turns NaN and Infinity into null and drops functions; the Python
// client refuses such values, and so does this one.
function strictValue(key, value) {
  if (typeof value === "number" && !Number.isFinite(value)) {
    throw new TypeError(`${value} is not a JSON number`);
  }
  if (typeof value === "function" || typeof value === "symbol") {
    throw new TypeError(`a ${typeof value} is not a JSON value`);
  }
  return value;
}

/**
 * `value` as JSON text, refusing what JSON cannot carry (NaN, Infinity, functions, symbols,
 * BigInt) instead of turning it into null. `undefined` becomes "null".
 * @throws {TypeError}
 */
function strictJSON(value) {
  return JSON.stringify(value, strictValue) ?? "null";
}

/**
 * The wire form of a call's arguments: a JSON array of the positional ones (empty bytes for
 * none) and a JSON object of named ones (always empty: JavaScript has no keyword arguments;
 * `tools.x({id})` sends one positional object, which a `tool.step` tool takes as its input).
 * Trailing `undefined` arguments are dropped, as if they had not been passed.
 *
 * @param {unknown[]} args
 * @returns {[Buffer, Buffer]}
 * @throws {ToolError} type "InvalidArgument" when an argument is not a JSON value.
 */
function encodeArguments(args) {
  let count = args.length;
  while (count > 0 && args[count - 1] === undefined) count -= 1;
  if (count === 0) return [EMPTY, EMPTY];
  let text;
  try {
    text = strictJSON(args.slice(0, count));
  } catch (error) {
    throw new ToolError(`arguments must be JSON values: ${error.message}`, { type: "InvalidArgument" });
  }
  return [Buffer.from(text, "utf8"), EMPTY];
}

/**
 * A CallToolStreamRequest's fields, for lib/proto.js. Empty fields are left out, so the bytes
 * on the wire are the ones the Python client sends.
 * @param {string} [traceparent] the caller's W3C trace context, or "" for none.
 */
function streamRequest(callId, toolName, positional, named, traceparent = "") {
  const call = { toolName };
  if (positional.length > 0) call.positionalArgumentsJson = positional;
  if (named.length > 0) call.namedArgumentsJson = named;
  if (traceparent) call.traceparent = traceparent;
  return { callId: BigInt(callId), call };
}

function utf8(bytes) {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
}

/**
 * The result of a decoded CallToolResponse.
 * @throws {ToolError} the error the response carries.
 */
function decodeResponse(response) {
  const { outcome } = response;
  if (outcome.case === "error") {
    const error = outcome.value;
    throw new ToolError(error.message, {
      type: error.type,
      retryable: error.retryable,
      errorId: error.errorId,
    });
  }
  if (outcome.case !== "resultJson") {
    throw new ToolError("the daemon answered with neither a result nor an error", { type: "ProtocolError" });
  }
  return JSON.parse(utf8(outcome.value));
}

/**
 * The result of a decoded CallToolStreamResponse.
 * @throws {ToolError} the error it carries, or the one its status means.
 */
function decodeStreamAnswer(answer) {
  const { case: kind, value } = answer.answer;
  if (kind === "status") throw statusError(value.code, value.message);
  if (kind !== "response") {
    throw new ToolError("the daemon answered a call with nothing", { type: "ProtocolError" });
  }
  return decodeResponse(value);
}

/** The definitions listed in a decoded ListToolsResponse. */
function decodeDefinitions(response) {
  return response.tools.map((entry) => JSON.parse(utf8(entry.definitionJson)));
}

module.exports = {
  FORMATS,
  decodeDefinitions,
  decodeResponse,
  decodeStreamAnswer,
  encodeArguments,
  statusError,
  streamRequest,
  strictJSON,
};
