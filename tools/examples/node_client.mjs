// A minimal BlackDrez client for Node.js using only built-ins: docs/protocol.md in practice.
//
// It greets, creates a two-seat table, asks the server for a bot opponent, starts a one-round
// game, plays a simple strategy, keeps the table in step with sequence numbers (resync on a gap),
// and at the end checks the fairness commitment: SHA-256(seed) must equal the commitment.
//
// Node 22+ has a global WebSocket; Node 20 needs the flag:
//   node --experimental-websocket tools/examples/node_client.mjs [ws://127.0.0.1:8765/] [name]
// Exit status 0 when the game ended and the commitment held.

import { createHash } from "node:crypto";

const url = process.argv[2] ?? "ws://127.0.0.1:8765/";
const name = process.argv[3] ?? "Node";
if (typeof WebSocket !== "function") {
  console.error("no global WebSocket: run with node --experimental-websocket (Node 20)");
  process.exit(2);
}

const ws = new WebSocket(url);
let nextId = 1;
const pending = new Map(); // request id -> {resolve, reject}
const tables = new Map(); // table id -> {seq, seat, info, view, legal, deadline}
let gameTable = null;
let acting = false;

function send(message) {
  ws.send(JSON.stringify(message));
}

/** Send a request with a fresh id; resolve with its reply, reject with an error reply. */
function request(message) {
  const id = nextId++;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject });
    send({ ...message, id });
  });
}

function applySnapshot(snapshot) {
  tables.set(snapshot.table, {
    seq: snapshot.seq,
    seat: snapshot.seat,
    info: snapshot.info,
    view: snapshot.view,
    legal: snapshot.legal,
    deadline: snapshot.deadline,
  });
}

/** Apply an update only if its first new event follows the last one held; resync on a gap. */
function applyUpdate(update) {
  const state = tables.get(update.table);
  if (state === undefined) return; // a snapshot is on its way
  const fresh = update.events.filter((e) => e.seq > state.seq);
  if (update.events.length > 0 && fresh.length === 0) return; // already held
  if (fresh.length > 0 && fresh[0].seq !== state.seq + 1) {
    request({ type: "resync", table: update.table, since: state.seq }).catch(console.error);
    return;
  }
  for (const { seq, event } of fresh) console.log(`  #${seq} ${JSON.stringify(event)}`);
  state.seq = Math.max(state.seq, update.seq);
  state.view = update.view;
  state.legal = update.legal;
  state.deadline = update.deadline;
  if (update.info !== null) state.info = update.info;
}

function receive(message) {
  if (message.type === "welcome") {
    console.log(`welcome: player ${message.player} (${message.name}), protocol ${message.version}`);
    play().catch((error) => {
      console.error(error);
      process.exit(1);
    });
    return;
  }
  if (message.type === "snapshot") applySnapshot(message);
  if (message.type === "update") applyUpdate(message);
  if (message.type === "joined") {
    tables.set(message.table.id, { seq: 0, seat: message.seat, info: message.table, legal: [] });
  }
  const waiter = message.id == null ? undefined : pending.get(message.id);
  if (waiter !== undefined) {
    pending.delete(message.id);
    if (message.type === "error") waiter.reject(new Error(`${message.code}: ${message.message}`));
    else waiter.resolve(message);
  }
  if (gameTable !== null) afterChange();
}

/** A simple BlackDrez strategy: hit below 8, then stand if allowed, else withdraw. */
function choose(state) {
  const kinds = state.legal.map((action) => action.type);
  const value = state.view.seats[state.seat].value ?? 0;
  if (value < 8 && kinds.includes("hit")) return { type: "hit" };
  if (kinds.includes("stand")) return { type: "stand" };
  return { type: "withdraw" };
}

function afterChange() {
  const state = tables.get(gameTable);
  if (state === undefined || state.view == null) return;
  if (state.view.phase === "over") {
    const { seed, commitment, result } = state.view;
    const fair = createHash("sha256").update(seed, "utf8").digest("hex") === commitment;
    console.log(`game over: ${JSON.stringify(result.ranking)}`);
    console.log(`seed ${seed}: commitment ${fair ? "holds (fair)" : "DOES NOT HOLD"}`);
    gameTable = null;
    ws.close(1000);
    process.exitCode = fair ? 0 : 1;
    return;
  }
  if (state.legal.length > 0 && !acting) {
    acting = true;
    const action = choose(state);
    console.log(`my turn (hand ${state.view.seats[state.seat].value}): ${action.type}`);
    request({ type: "act", table: gameTable, action })
      .catch((error) => console.error(`act refused: ${error.message}`))
      .finally(() => {
        acting = false;
        afterChange();
      });
  }
}

async function play() {
  const options = { name: "Node example", seats: 2, max_rounds: 1, round_pause_seconds: 0 };
  const joined = await request({ type: "create_table", options });
  const table = joined.table.id;
  console.log(`created table ${table}, seat ${joined.seat}`);
  await request({ type: "add_bots", table, count: 1 });
  while (!tables.get(table).info.seats.every((seat) => seat !== null)) {
    await new Promise((resolve) => setTimeout(resolve, 50)); // the bot connects on its own
  }
  await request({ type: "ready", table });
  gameTable = table;
  await request({ type: "start", table });
  console.log("game started");
  afterChange();
}

ws.addEventListener("open", () => send({ type: "hello", versions: [1], name, client: "node-example" }));
ws.addEventListener("message", (event) => receive(JSON.parse(event.data)));
ws.addEventListener("close", (event) => {
  if (event.code !== 1000) {
    console.error(`closed: ${event.code} ${event.reason}`);
    process.exitCode = 1;
  }
});
