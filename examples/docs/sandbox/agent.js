// The same calls from Node: `node agent.js`, or `import { tools } from "inngest_tools"`.
const { tools, ToolError, definitions } = require("inngest_tools");

async function main() {
  const invoices = await tools.listInvoices("cus_1"); // a plain function: positional arguments
  const customer = await tools.getCustomer({ id: "cus_1" }); // a tool.step: one object of named arguments
  console.log(`${customer.name}: ${invoices.length} invoices`);
  try {
    await tools.getCustomer({ id: 42 });
  } catch (error) {
    if (error instanceof ToolError) console.log(error.type, error.message); // ValidationError ...
  }
  const forModel = await definitions({ format: "openai" }); // this command's tools, for a model API
  console.log(forModel.map((definition) => definition.name).join(","));
}

main();
