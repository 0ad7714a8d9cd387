"use strict";
/**
 * Call the host application's tools from code running in a toolbridge sandbox.
 *
 *     const { tools, ToolError } = require("inngest_tools");
 *     const a = await tools.getCustomer("cus_1");          // a plain function: positional
 *     const b = await tools.getCustomer({ id: "cus_1" });  // a tool.step: named, validated
 *
 * The daemon that started this process put its address and this command's token in the
 * environment (TOOLBRIDGE_ADDRESS, TOOLBRIDGE_TOKEN); nothing else is needed.
 */

const path = require("node:path");
const { load } = require("./lib/loader");

// Through the loader: compiled from the sandbox runtime's code cache where it has one.
const { definitions, tools } = load(path.join(__dirname, "lib", "client.js"));
const { ToolError } = load(path.join(__dirname, "lib", "errors.js"));

module.exports = { ToolError, definitions, tools };
