// A sandbox on another host calls its tools over TLS: nothing in the code says so. The
// environment does: TOOLBRIDGE_ADDRESS=tls://daemon.internal:7443, TOOLBRIDGE_TOKEN, and
// TOOLBRIDGE_TLS_CA (plus TOOLBRIDGE_TLS_CERT and TOOLBRIDGE_TLS_KEY for mutual TLS).
const { tools, ToolError } = require("inngest_tools");

async function main() {
  try {
    const echoed = await tools.echo("hello over TLS");
    console.log(JSON.stringify(echoed));
  } catch (error) {
    if (!(error instanceof ToolError)) throw error;
    // A certificate problem is one line: "the daemon at tls://...: its TLS certificate has expired".
    console.error(`${error.type}: ${error.message}`);
    process.exitCode = 1;
  }
}

main();
