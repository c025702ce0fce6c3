// Compiled (not run) by tests/test_js_client.py with tsc --strict: the package's types as a
// TypeScript bot author uses them.
import { Client, ServerError, type ServerMessage, type TableState } from "@blackdrez/client";

export async function typed(url: string): Promise<string | undefined> {
  const client = await Client.connect(url, { name: "Typed", encoding: "msgpack" });
  const reply: ServerMessage = await client.request({ type: "join", table: "t_x", seat: 0 });
  if (reply.type === "joined") {
    const state: TableState | undefined = client.table(reply.table.id);
    return state?.info.name;
  }
  // @ts-expect-error: no such message type
  await client.request({ type: "no_such_message" });
  // @ts-expect-error: join needs its table
  await client.request({ type: "join" });
  try {
    await client.act("t_x", { type: "hit" });
  } catch (error) {
    if (error instanceof ServerError) return error.code;
  }
  return client.welcome?.limits.burst.toFixed(0);
}
