// A BlackDrez client for Node.js on the JavaScript client package (clients/js, installed as
// "@blackdrez/client"): docs/protocol.md in practice.
//
// It greets, creates a two-seat table, asks the server for a bot opponent, starts a one-round
// game, plays a simple strategy, logs every event of the table as it comes (the package keeps the
// table in step: numbered events, a resync on a gap), and at the end checks the fairness
// commitment: SHA-256(seed) must equal the commitment published when the game started.
//
// Node 22+ has a global WebSocket; Node 20 needs the flag:
//   node --experimental-websocket tools/examples/node_client.mjs [ws://127.0.0.1:8765/] [name]
// Exit status 0 when the game ended and the commitment held.

import { createHash } from "node:crypto";

import { Client, ServerError } from "../../clients/js/index.js";

const url = process.argv[2] ?? "ws://127.0.0.1:8765/";
const name = process.argv[3] ?? "Node";

const client = await Client.connect(url, { name, client: "node-example", reconnect: false });
const { welcome } = client;
console.log(`welcome: player ${welcome.player} (${welcome.name}), protocol ${welcome.version}`);
client.addEventListener("update", ({ detail }) => {
  for (const { seq, event } of detail.message.events) console.log(`  #${seq} ${JSON.stringify(event)}`);
});

/** A simple BlackDrez strategy: hit below 8, then stand if allowed, else withdraw. */
function choose(state) {
  const kinds = state.legal.map((action) => action.type);
  const value = state.view.seats[state.seat].value ?? 0;
  if (value < 8 && kinds.includes("hit")) return { type: "hit" };
  if (kinds.includes("stand")) return { type: "stand" };
  return { type: "withdraw" };
}

const options = { name: "Node example", seats: 2, max_rounds: 1, round_pause_seconds: 0 };
const joined = await client.request({ type: "create_table", options });
const table = joined.table.id;
console.log(`created table ${table}, seat ${joined.seat}`);
await client.request({ type: "add_bots", table, count: 1 });
while (!client.table(table).info.seats.every((seat) => seat !== null)) {
  await client.waitFor((m) => m.table === table && m.type === "update", 10000); // the bot sits
}
await client.request({ type: "ready", table });
await client.request({ type: "start", table });
console.log("game started");

for (;;) {
  const state = client.table(table);
  if (state.view?.phase === "over") break;
  if (state.legal.length > 0) {
    const action = choose(state);
    console.log(`my turn (hand ${state.view.seats[state.seat].value}): ${action.type}`);
    await client.act(table, action).catch((error) => {
      if (!(error instanceof ServerError)) throw error;
      console.error(`act refused: ${error.code}: ${error.message}`);
    });
  } else {
    await client.waitFor((m) => m.table === table && ["update", "snapshot"].includes(m.type), 60000);
  }
}
const { seed, commitment, result } = client.table(table).view;
const fair = createHash("sha256").update(seed, "utf8").digest("hex") === commitment;
console.log(`game over: ${JSON.stringify(result.ranking)}`);
console.log(`seed ${seed}: commitment ${fair ? "holds (fair)" : "DOES NOT HOLD"}`);
client.close();
process.exitCode = fair ? 0 : 1;
