/**
 * Call the host application's tools from code running in a toolbridge sandbox.
 *
 * ```js
 * const { tools, ToolError } = require("inngest_tools");
 * const a = await tools.getCustomer("cus_1");          // a plain function: positional
 * const b = await tools.getCustomer({ id: "cus_1" });  // a tool.step: named, validated
 * ```
 */

/** What a tool call takes and returns: values that travel as JSON. */
export type JSONValue = null | boolean | number | string | JSONValue[] | { [key: string]: JSONValue };

/**
 * A host tool. Positional arguments go to a plain function; one object of named arguments
 * goes to a `tool.step` tool. Resolves with the tool's result (parsed from JSON); rejects
 * with a {@link ToolError}.
 */
export type Tool = (...args: any[]) => Promise<any>;

/**
 * The command's tools by name. Declare your own signatures by merging into this interface:
 *
 * ```ts
 * declare module "inngest_tools" {
 *   interface Tools { getCustomer(input: { id: string }): Promise<{ name: string }> }
 * }
 * ```
 */
export interface Tools {
  readonly [name: string]: Tool;
}

/** `tools.name(...)` calls the host tool `name`. (`tools.then` is not a tool: it is undefined.) */
export declare const tools: Tools;

/** A tool call failed. */
export declare class ToolError extends Error {
  constructor(message: string, options?: { type?: string; retryable?: boolean; errorId?: string });
  /**
   * A short machine-readable kind: "ValidationError", "ToolTimeout", "MaxCallsExceeded",
   * "ToolNotFound", "Unavailable", "TLSError", the type the tool raised, ...
   */
  type: string;
  /** Whether calling again with the same arguments may succeed. */
  retryable: boolean;
  /** For unexpected failures, the id the host's journal keeps the detail under; else "". */
  errorId: string;
}

/** The shapes of tool definitions that model APIs expect. */
export type DefinitionFormat = "anthropic" | "openai" | "openai-strict" | "mcp";

/**
 * The definitions of this command's tools, ready for a model API: `{name, description,
 * input_schema}` for "anthropic" (the default), `{type: "function", name, description,
 * parameters}` for "openai", `{name, description, inputSchema, outputSchema}` for "mcp".
 * `definitions({ format: "openai" })`; `definitions("openai")` is the same.
 */
export declare function definitions(
  options?: { format?: DefinitionFormat } | DefinitionFormat,
): Promise<Array<{ [key: string]: JSONValue }>>;
