// The module resolve hook registered by register.js (it runs on Node's loader thread).

const NAME = "inngest_tools";
const ENTRY = new URL("../index.mjs", import.meta.url).href;

export async function resolve(specifier, context, nextResolve) {
  if (specifier !== NAME) return nextResolve(specifier, context);
  try {
    // A copy installed next to the script wins, as it does for `require`.
    return await nextResolve(specifier, context);
  } catch (error) {
    if (error?.code !== "ERR_MODULE_NOT_FOUND") throw error;
    return { url: ENTRY, format: "module", shortCircuit: true };
  }
}
