// Compiles without errors against index.d.mts (ES module consumer).
import client, { ToolError, definitions, tools } from "inngest_tools";

const same: typeof tools = client.tools;
const error: ToolError = new client.ToolError("x");
export const listed = await definitions("mcp");
export const value: unknown = await same.getCustomer("cus_1");
export const kind: string = error.type;
