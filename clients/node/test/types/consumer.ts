// Compiles without errors against index.d.ts (CommonJS consumer).
import { type DefinitionFormat, type JSONValue, ToolError, definitions, tools } from "inngest_tools";

declare module "inngest_tools" {
  interface Tools {
    getSeats(input: { id: string }): Promise<{ seats: number }>;
  }
}

export async function main(): Promise<number> {
  const customer = await tools.getCustomer("cus_1");
  const named = await tools.getCustomer({ id: "cus_1" });
  const seats: { seats: number } = await tools.getSeats({ id: "cus_1" });
  const format: DefinitionFormat = "openai-strict";
  const listed: Array<{ [key: string]: JSONValue }> = await definitions(format);
  await definitions();
  try {
    await tools["listInvoices"]();
  } catch (error) {
    if (error instanceof ToolError) {
      const kind: string = error.type;
      const retryable: boolean = error.retryable;
      const id: string = error.errorId;
      const message: string = error.message;
      return kind.length + id.length + message.length + (retryable ? 1 : 0);
    }
  }
  return customer.seats + named.seats + seats.seats + listed.length;
}

export const made = new ToolError("no such customer", { type: "NotFound", retryable: false, errorId: "err_1" });
