// `import { tools, ToolError } from "inngest_tools"`: the same objects as `require` gives.
import client from "./index.js";

export const { ToolError, definitions, tools } = client;
export default client;
