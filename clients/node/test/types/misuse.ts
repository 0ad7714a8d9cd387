// Each line marked ERROR must fail to compile; nothing else may.
import { ToolError, definitions, tools } from "inngest_tools";

declare module "inngest_tools" {
  interface Tools {
    getSeats(input: { id: string }): Promise<{ seats: number }>;
  }
}

export async function misuse(): Promise<void> {
  await definitions("gemini"); // ERROR
  const kind: number = new ToolError("x").type; // ERROR
  await tools.getSeats({ id: 1 }); // ERROR
  new ToolError("x", { retryable: "yes" }); // ERROR
  const notAPromise: string = tools.getCustomer("cus_1"); // ERROR
  void kind;
  void notAPromise;
}
