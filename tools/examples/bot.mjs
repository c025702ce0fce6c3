// A minimal BlackDrez bot in JavaScript on the raw JSON protocol (walk-through: docs/bots.md):
//   node --experimental-websocket tools/examples/bot.mjs ws://127.0.0.1:8765/ [TABLE]
// It hosts a two-seat, one-round table against a server bot, or sits at TABLE and waits for its
// host; plays one game (hit below 8), prints the ranking and exits 0 (1 if no game ended).
const [url, joinTable] = process.argv.slice(2);
const ws = new WebSocket(url); // built into Node 22+ and browsers; Node 20 needs the flag above
const waiting = new Map(); // request id -> resolve
let nextId = 1, table = joinTable, seat = null, seq = 0, last = null, acting = false;

const request = (message) => new Promise((resolve) => {
  waiting.set(nextId, resolve);
  ws.send(JSON.stringify({ ...message, id: nextId++ }));
});

function choose(view, legal) { // the whole strategy
  const kinds = legal.map((action) => action.type);
  if ((view.seats[seat].value ?? 0) < 8 && kinds.includes("hit")) return { type: "hit" };
  return { type: kinds.includes("stand") ? "stand" : "withdraw" };
}

function apply(message) { // a snapshot, or an update that follows the last event we hold
  if (message.type === "update" && (message.events[0]?.seq ?? 0) > seq + 1) {
    return request({ type: "resync", table, since: seq }); // a gap: the server fills it in
  }
  if (message.seq >= seq) [seq, last] = [message.seq, message];
  play();
}

function play() {
  if (last.view?.phase === "over") {
    console.log("game over:", JSON.stringify(last.view.result.ranking));
    ws.close(1000);
  } else if (last.legal.length > 0 && !acting) {
    acting = true; // one action at a time; once it is accepted, look at the table again
    request({ type: "act", table, action: choose(last.view, last.legal) })
      .then((reply) => { acting = false; if (reply.type === "ok") play(); });
  }
}

async function setup() {
  const options = { seats: 2, max_rounds: 1, round_pause_seconds: 0 };
  const joined = await request(table ? { type: "join", table } : { type: "create_table", options });
  [seat, table] = [joined.seat, joined.table.id];
  if (!joinTable) await request({ type: "add_bots", table, count: 1 });
  await request({ type: "ready", table });
  while (!joinTable && (await request({ type: "start", table })).type === "error") {
    await new Promise((resolve) => setTimeout(resolve, 100)); // the bot is still connecting
  }
}

ws.onopen = () => ws.send(JSON.stringify({ type: "hello", versions: [1], name: "MiniJS" }));
ws.onclose = ws.onerror = () => process.exit(last?.view?.phase === "over" ? 0 : 1);
ws.onmessage = ({ data }) => {
  const message = JSON.parse(data);
  if (message.type === "error") console.error("refused:", message.code, message.message);
  if (waiting.has(message.id)) waiting.get(message.id)(message);
  if (message.type === "welcome") setup();
  if (["snapshot", "update"].includes(message.type) && message.table === table) apply(message);
};
