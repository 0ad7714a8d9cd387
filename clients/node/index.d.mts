export * from "./index.js";
import * as client from "./index.js";
export default client;
