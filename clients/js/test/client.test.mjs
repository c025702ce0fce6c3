// @blackdrez/client against a live node (BLACKDREZ_URL; tests/test_js_client.py starts one):
//   BLACKDREZ_URL=ws://127.0.0.1:8765/ node --experimental-websocket --test clients/js/test/
import assert from "node:assert/strict";
import { test } from "node:test";

import { Client, ServerError } from "../index.js";

const url = process.env.BLACKDREZ_URL ?? "ws://127.0.0.1:8765/";

/** Play the table's game with a simple strategy until it is over. */
async function playOut(client, table) {
  for (;;) {
    const state = client.table(table);
    if (state?.view?.phase === "over") return state;
    const kinds = state?.legal.map((a) => a.type) ?? [];
    if (kinds.length) {
      const mine = state.view.seats[state.seat].value ?? 0;
      const action = mine < 8 && kinds.includes("hit") ? { type: "hit" } : { type: kinds.includes("stand") ? "stand" : "withdraw" };
      await client.act(table, action).catch(() => {});
    } else {
      await client.waitFor((m) => m.table === table && (m.type === "update" || m.type === "snapshot"), 60000);
    }
  }
}

async function hostAgainstABot(client) {
  const options = { seats: 2, max_rounds: 1, round_pause_seconds: 0 };
  const joined = await client.request({ type: "create_table", options });
  const table = joined.table.id;
  await client.request({ type: "add_bots", table, count: 1 });
  await client.request({ type: "ready", table });
  for (;;) {
    try { await client.request({ type: "start", table }); return table; } catch { await new Promise((r) => setTimeout(r, 100)); }
  }
}

test("the handshake gives the welcome and its limits pace the client", async () => {
  const client = await Client.connect(url, { name: "Pacer", reconnect: false });
  try {
    assert.equal(client.welcome.version, 1);
    assert.equal(client.welcome.name, "Pacer");
    const { burst } = client.welcome.limits;
    const pings = Array.from({ length: burst + 20 }, () => client.request({ type: "ping" }, { retryRateLimited: false }));
    const replies = await Promise.all(pings); // more than the burst: paced, none refused
    assert.ok(replies.every((r) => r.type === "pong"));
  } finally {
    client.close();
  }
});

test("an error reply rejects with a ServerError naming its code", async () => {
  const client = await Client.connect(url, { name: "Erring", reconnect: false });
  try {
    await assert.rejects(client.request({ type: "join", table: "t_nowhere" }), (error) => error instanceof ServerError && error.code === "not_found");
  } finally {
    client.close();
  }
});

test("a game is played with the table kept in step, in MessagePack", async () => {
  const client = await Client.connect(url, { name: "Packed", encoding: "msgpack", reconnect: false });
  try {
    const table = await hostAgainstABot(client);
    const state = await playOut(client, table);
    assert.equal(state.view.phase, "over");
    assert.ok(state.view.result.ranking.length >= 1);
  } finally {
    client.close();
  }
});

test("a dropped connection comes back as the same player and resyncs its table", async () => {
  const client = await Client.connect(url, { name: "Dropped" });
  try {
    const player = client.welcome.player;
    const options = { seats: 3, max_rounds: 1 };
    const table = (await client.request({ type: "create_table", options })).table.id;
    const before = client.table(table).seq;
    const back = new Promise((resolve) => client.addEventListener("welcome", (e) => resolve(e.detail), { once: true }));
    client.ws.close(3000, "the network went away"); // not asked for: it reconnects
    const welcome = await back;
    assert.equal(welcome.player, player);
    assert.ok(welcome.tables.includes(table));
    const updated = client.waitFor((m) => m.table === table && m.type === "update", 10000);
    await client.request({ type: "ready", table });
    await updated;
    assert.ok(client.table(table).seq > before, "in step after the drop");
  } finally {
    client.close();
  }
});
