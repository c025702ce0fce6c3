// A minimal bot on @blackdrez/client (docs/bots.md; installed, import "@blackdrez/client"):
//   node --experimental-websocket tools/examples/bot.mjs ws://127.0.0.1:8765/ [TABLE]
// Hosts a two-seat, one-round table against a server bot (or sits at TABLE), plays one game
// (hit below 8) and prints the ranking.
import { Client } from "../../clients/js/index.js";
const [url, given] = process.argv.slice(2);
const client = await Client.connect(url, { name: "MiniJS", reconnect: false });
const create = { type: "create_table", options: { seats: 2, max_rounds: 1, round_pause_seconds: 0 } };
const joined = await client.request(given ? { type: "join", table: given } : create);
const [table, seat] = [joined.table.id, joined.seat];
if (!given) await client.request({ type: "add_bots", table, count: 1 });
await client.request({ type: "ready", table });
while (!given && (await client.request({ type: "start", table }).catch((e) => e)) instanceof Error) {
  await new Promise((resolve) => setTimeout(resolve, 100)); // the bot is still connecting
}

function choose({ view, legal }) { // the whole strategy
  const kinds = legal.map((action) => action.type);
  if ((view.seats[seat].value ?? 0) < 8 && kinds.includes("hit")) return { type: "hit" };
  return { type: kinds.includes("stand") ? "stand" : "withdraw" };
}

for (;;) { // the client keeps the table in step (resync on a gap); act when it is our turn
  const state = client.table(table);
  if (state?.view?.phase === "over") break;
  if (state?.legal.length) await client.act(table, choose(state)).catch(() => {});
  else await client.waitFor((m) => m.table === table && ["update", "snapshot"].includes(m.type), 60000);
}
console.log("game over:", JSON.stringify(client.table(table).view.result.ranking));
client.close();
