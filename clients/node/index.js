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

const { definitions, tools } = require("./lib/client");
const { ToolError } = require("./lib/errors");

module.exports = { ToolError, definitions, tools };
