"use strict";
// The wire envelope, as pure functions: what a call looks like in bytes and what an answer
// means. tests/vectors/wire.json pins both, for this client and the Python one alike.

const { LENGTH_DELIMITED, Writer } = require("./codec");
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
 */
function statusError(code, message) {
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
 * A CallToolStreamRequest as a plain object for the proto codec. Empty fields are left out,
 * so the bytes on the wire are the ones the Python client sends.
 * @param {string} [traceparent] the caller's W3C trace context, or "" for none.
 */
function streamRequest(callId, toolName, positional, named, traceparent = "") {
  const call = { tool_name: toolName };
  if (positional.length > 0) call.positional_arguments_json = positional;
  if (named.length > 0) call.named_arguments_json = named;
  if (traceparent) call.traceparent = traceparent;
  return { call_id: callId, call };
}

// CallToolStreamRequest.more: field 3, length-delimited (its tag is one byte).
const MORE_FIELD = 3;
const MORE_TAG_BYTES = 1;

function varintLength(value) {
  let length = 1;
  for (let rest = value; rest >= 0x80; rest = Math.floor(rest / 0x80)) length += 1;
  return length;
}

/**
 * What an encoded call of `length` bytes adds to a batch when it rides in another's `more`:
 * itself, its field tag and its length.
 */
function batchEntryBytes(length) {
  return MORE_TAG_BYTES + varintLength(length) + length;
}

/**
 * One CallToolStreamRequest carrying several encoded calls: the first in its own fields, the
 * rest in `more`. `more` is the last field, so appending its entries to the first call's
 * bytes is the canonical encoding (the bytes the Python client's batch is).
 * @param {Buffer[]} encoded each an encoded CallToolStreamRequest with no `more` of its own.
 * @returns {Buffer}
 */
function batchMessage(encoded) {
  if (encoded.length === 1) return encoded[0];
  const writer = new Writer();
  writer.append(encoded[0]);
  for (let index = 1; index < encoded.length; index += 1) {
    writer.tag(MORE_FIELD, LENGTH_DELIMITED);
    writer.raw(encoded[index]);
  }
  return writer.finish();
}

/**
 * The result of a decoded CallToolResponse.
 * @throws {ToolError} the error the response carries.
 */
function decodeResponse(response) {
  if (response.outcome === "error") {
    const error = response.error;
    throw new ToolError(error.message, {
      type: error.type,
      retryable: error.retryable,
      errorId: error.error_id,
    });
  }
  if (response.outcome !== "result_json") {
    throw new ToolError("the daemon answered with neither a result nor an error", { type: "ProtocolError" });
  }
  return JSON.parse(Buffer.from(response.result_json).toString("utf8"));
}

/**
 * The result of a decoded CallToolStreamResponse.
 * @throws {ToolError} the error it carries, or the one its status means.
 */
function decodeStreamAnswer(answer) {
  if (answer.answer === "status") {
    throw statusError(answer.status.code, answer.status.message);
  }
  if (answer.answer !== "response") {
    throw new ToolError("the daemon answered a call with nothing", { type: "ProtocolError" });
  }
  return decodeResponse(answer.response);
}

/** The definitions listed in a decoded ListToolsResponse. */
function decodeDefinitions(response) {
  return response.tools.map((entry) => JSON.parse(Buffer.from(entry.definition_json).toString("utf8")));
}

module.exports = {
  FORMATS,
  batchEntryBytes,
  batchMessage,
  decodeDefinitions,
  decodeResponse,
  decodeStreamAnswer,
  encodeArguments,
  statusError,
  streamRequest,
  strictJSON,
};
