"use strict";
// The caller's trace context for each call, so spans made in the sandbox join the host's trace.
//
// The client never depends on OpenTelemetry: when `@opentelemetry/api` resolves (from this
// package, or from the script's directory or the working directory) and a span is active,
// its W3C `traceparent` goes with the call; otherwise the `TRACEPARENT` the daemon gave the
// command (its command's span) does, and with neither, nothing. Any copy of the API will do:
// they share the tracer and context manager the application registered, through a global.
// Until that global exists no span can be active, so the API is looked for only once it does
// (the search through node_modules folders cost a sandboxed command about 1.5 ms).

const path = require("node:path");
const { createRequire } = require("node:module");

const TRACEPARENT_VARIABLE = "TRACEPARENT";
const TRACE_ID = /^[0-9a-f]{32}$/;
const SPAN_ID = /^[0-9a-f]{16}$/;

// Where @opentelemetry/api (major version 1) keeps what the application registered.
const OTEL_GLOBAL = Symbol.for("opentelemetry.js.api.1");

let api;

function bases() {
  const places = [path.join(process.cwd(), "noop.js")];
  if (require.main && require.main.filename) places.unshift(require.main.filename);
  if (process.argv[1]) places.unshift(path.resolve(process.argv[1]));
  return places;
}

/** `@opentelemetry/api` if this process can resolve it, else null (looked up once). */
function openTelemetryApi() {
  if (api !== undefined) return api;
  api = null;
  const requirers = [require, ...bases().map((base) => createRequire(base))];
  for (const load of requirers) {
    try {
      api = load("@opentelemetry/api");
      break;
    } catch {
      // not resolvable from here; try the next place
    }
  }
  return api;
}

/** The `traceparent` of the active span, else `$TRACEPARENT`, else "". */
function currentTraceparent() {
  const otel = globalThis[OTEL_GLOBAL] === undefined ? null : openTelemetryApi();
  if (otel !== null) {
    try {
      const span = otel.trace.getSpanContext(otel.context.active());
      if (span && TRACE_ID.test(span.traceId) && SPAN_ID.test(span.spanId) && !/^0+$/.test(span.traceId)) {
        const flags = (Number(span.traceFlags) & 0xff).toString(16).padStart(2, "0");
        return `00-${span.traceId}-${span.spanId}-${flags}`;
      }
    } catch {
      // a broken tracing setup never fails a tool call
    }
  }
  return process.env[TRACEPARENT_VARIABLE] ?? "";
}

module.exports = { currentTraceparent };
