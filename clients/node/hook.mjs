// Makes `import ... from "inngest_tools"` work from a script in any folder.
//
// `require` finds the client through NODE_PATH, which ES modules ignore. The daemon starts
// Node commands with NODE_OPTIONS=--import=<this file>, which adds a resolve hook: a bare
// "inngest_tools" that Node cannot resolve on its own resolves to this client.
import { register } from "node:module";

register("./lib/resolve.mjs", import.meta.url);
