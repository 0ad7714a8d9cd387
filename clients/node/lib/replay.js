"use strict";
// Recorded calls answered here, without the daemon, when a command runs again.
//
// A command interrupted before it ended runs again on replay, and the calls it had made are
// answered from the journal; each would still cross the socket, so the daemon hands the
// command what it recorded instead: TOOLBRIDGE_REPLAY names the file (the contract is written
// down in the daemon's toolbridge/_commands/replay.py). A call found there is answered here;
// any other goes to the daemon as usual, which answers it from the journal or runs it.
//
// A call is found when its tool and its input match a record's exactly: the input is spelled
// as the daemon spells it (Python's canonical JSON: sorted keys, no spaces, Python's spelling
// of each number), so it matches here exactly when the daemon would give it that step key.
// The n-th such call takes the n-th record by creating taken/<entry>.<n> beside the file
// (exclusively: the daemon and other processes of the command take records the same way, so
// none is answered twice); those files tell the daemon which recorded calls were asked again.

const fs = require("node:fs");
const path = require("node:path");
const { ToolError } = require("./errors");

const REPLAY_VARIABLE = "TOOLBRIDGE_REPLAY";
const FORMAT = 1;

/** Python's repr of a float that is not an integer below 1e21 (the daemon parses it as one). */
function pythonFloat(number) {
  const [mantissa, exponentText] = Math.abs(number).toExponential().split("e");
  const digits = mantissa.replace(".", "");
  const exponent = Number(exponentText);
  const sign = number < 0 ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    const fraction = digits.length > 1 ? `.${digits.slice(1)}` : "";
    const magnitude = String(Math.abs(exponent)).padStart(2, "0");
    return `${sign}${digits[0]}${fraction}e${exponent < 0 ? "-" : "+"}${magnitude}`;
  }
  if (exponent < 0) return `${sign}0.${"0".repeat(-exponent - 1)}${digits}`;
  if (exponent >= digits.length - 1) return `${sign}${digits}${"0".repeat(exponent - digits.length + 1)}.0`;
  return `${sign}${digits.slice(0, exponent + 1)}.${digits.slice(exponent + 1)}`;
}

/** Python's order of str keys: by code point (JavaScript's default is by UTF-16 unit). */
function byCodePoint(a, b) {
  const left = [...a];
  const right = [...b];
  for (let index = 0; index < Math.min(left.length, right.length); index += 1) {
    const difference = left[index].codePointAt(0) - right[index].codePointAt(0);
    if (difference !== 0) return difference;
  }
  return left.length - right.length;
}

/**
 * The daemon's canonical spelling (toolbridge._json.canonical) of a value parsed from the
 * JSON this client sends: what JSON.stringify writes as an integer below 1e21 the daemon reads
 * as an int, anything else numeric as a float.
 */
function canonical(value) {
  if (value === null || typeof value === "boolean") return JSON.stringify(value);
  if (typeof value === "number") {
    return Number.isInteger(value) && Math.abs(value) < 1e21 ? JSON.stringify(value) : pythonFloat(value);
  }
  if (typeof value === "string") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  const keys = Object.keys(value).sort(byCodePoint);
  return `{${keys.map((key) => `${JSON.stringify(key)}:${canonical(value[key])}`).join(",")}}`;
}

/**
 * A call's input as the daemon records it and hashes it into the step key, from the
 * positional JSON this client sends (it has no named arguments); null when the daemon would
 * refuse it (a lone surrogate).
 */
function callInput(positional) {
  const json = positional.toString("utf8");
  // JSON.stringify escapes a lone surrogate as \udXXX; the daemon refuses such a call. (An
  // escaped backslash before "ud800" matches too: that call just goes to the daemon.)
  if (/\\u[dD][89a-fA-F]/.test(json)) return null;
  const args = json.length > 0 ? JSON.parse(json) : [];
  return canonical(args.length > 0 ? args : { args: [], kwargs: {} });
}

class Replay {
  constructor(directory, document) {
    this.directory = directory;
    this.maxCalls = Number(document.max_calls);
    this.maxRequestBytes = Number(document.max_request_bytes);
    /** `${tool}\0${input}` -> {number, records, next}. */
    this.entries = new Map();
    this.calls = 0; // every call this process made, answered here or not
    document.calls.forEach((entry, number) => {
      this.entries.set(`${entry.tool}\0${entry.input}`, { number, records: entry.records, next: 1 });
    });
  }

  /** The record answering this call, taken for it; null: ask the daemon. */
  find(name, positional) {
    this.calls += 1;
    if (this.entries.size === 0 || this.calls > this.maxCalls) return null;
    if (Buffer.byteLength(name, "utf8") + positional.length > this.maxRequestBytes) return null;
    const input = callInput(positional);
    const entry = input === null ? undefined : this.entries.get(`${name}\0${input}`);
    if (entry === undefined) return null;
    while (entry.next <= entry.records.length) {
      const occurrence = entry.next;
      entry.next += 1;
      if (this._take(entry.number, occurrence)) return entry.records[occurrence - 1];
    }
    return null;
  }

  _take(number, occurrence) {
    try {
      fs.closeSync(fs.openSync(path.join(this.directory, "taken", `${number}.${occurrence}`), "wx"));
      return true;
    } catch (error) {
      // Taken first by the daemon or another process of the command; anything else means
      // records cannot be taken here at all: the daemon answers them.
      if (error.code !== "EEXIST") this.entries.clear();
      return false;
    }
  }
}

/** The result of a recorded call, or the ToolError it ended with, thrown. */
function answer(record) {
  if (record.error !== undefined && record.error !== null) {
    const error = record.error;
    throw new ToolError(String(error.message ?? ""), {
      type: String(error.type || "ToolError"),
      retryable: Boolean(error.retryable),
      errorId: String(error.error_id ?? ""),
    });
  }
  return JSON.parse(record.result_json);
}

const loaded = new Map();

/** This process's replay records (read once), or null when the command has none. */
function current() {
  const file = process.env[REPLAY_VARIABLE] ?? "";
  if (!file) return null;
  if (!loaded.has(file)) {
    let replay = null;
    try {
      const document = JSON.parse(fs.readFileSync(file, "utf8"));
      if (document.format === FORMAT) replay = new Replay(path.dirname(file), document);
    } catch {
      replay = null; // unreadable: every call goes to the daemon, as without records
    }
    loaded.set(file, replay);
  }
  return loaded.get(file);
}

module.exports = { REPLAY_VARIABLE, Replay, answer, callInput, canonical, current };
