"use strict";
// The error a failed tool call rejects with.

/**
 * A tool call failed. Mirrors the Python client's `ToolError`.
 *
 * `type` is a short machine-readable kind ("ValidationError", "ToolTimeout",
 * "MaxCallsExceeded", "ToolNotFound", the type the tool raised, ...), `message` says what
 * went wrong in words meant for this code, `retryable` whether calling again may succeed,
 * and `errorId` (for unexpected failures) the id the host's journal keeps the detail under.
 */
class ToolError extends Error {
  /**
   * @param {string} message
   * @param {{type?: string, retryable?: boolean, errorId?: string}} [options]
   */
  constructor(message, { type = "ToolError", retryable = false, errorId = "" } = {}) {
    super(message);
    this.name = "ToolError";
    this.type = type;
    this.retryable = retryable;
    this.errorId = errorId;
  }
}

module.exports = { ToolError };
