// The browser client: connection, table state, and the screen now shown (lobby or a table).

import { Connection } from "./net.js";
import { TableStore } from "./tables.js";
import { h, swap } from "./dom.js";
import { Lobby } from "./lobby.js";
import { renderBlackDrez, describeEvent } from "./blackdrez.js";
import { renderPiles, resetPiles } from "./piles.js";
import { renderBlueJacket, resetBlueJacket } from "./bluejacket.js";

const CURRENT_KEY = "blackdrez.current";
const RENDERERS = { blackdrez: renderBlackDrez, blackjack_piles: renderPiles, blue_jacket: renderBlueJacket };

const conn = new Connection();
const store = new TableStore(conn);
const screen = document.getElementById("screen");
const statusBadge = document.getElementById("status");
const whoami = document.getElementById("whoami");
const toasts = document.getElementById("toasts");

/** What the app offers to the screens. */
const ctx = {
  conn,
  store,
  get me() { return conn.welcome?.player; },
  toast,
  /** Send a request; show its error unobtrusively; resolve with the reply or null. */
  async send(message) {
    try {
      return await conn.request(message);
    } catch (error) {
      toast(error.message);
      return null;
    }
  },
  act(table, action) { return ctx.send({ type: "act", table, action }); },
  open(id, mode = "seat", invite = null) {
    current = { id, mode, invite };
    sessionStorage.setItem(CURRENT_KEY, JSON.stringify(current));
    show();
  },
  lobby() {
    current = null;
    sessionStorage.removeItem(CURRENT_KEY);
    show();
  },
  async leave(id) {
    leaving.add(id);
    const reply = await ctx.send({ type: "leave", table: id });
    if (reply) {
      store.forget(id);
      ctx.lobby();
    }
  },
};

const leaving = new Set(); // tables this client is leaving: their closing is no news
let current = JSON.parse(sessionStorage.getItem(CURRENT_KEY) || "null");
const lobby = new Lobby(ctx);

function toast(text) {
  const note = h("div.toast", { role: "status" }, text);
  toasts.append(note);
  setTimeout(() => note.classList.add("fade"), 4500);
  setTimeout(() => note.remove(), 5200);
}

function show() {
  document.body.dataset.screen = current ? "table" : "lobby";
  if (!current) {
    lobby.mount(screen);
    return;
  }
  lobby.unmount();
  const table = store.get(current.id);
  if (!table || !table.info) {
    swap(screen, h("p.loading", "Loading the table…"));
    return;
  }
  const render = RENDERERS[table.info.game];
  screen.dataset.game = table.info.game;
  render(ctx, table, screen);
}

conn.addEventListener("status", ({ detail }) => {
  const text = {
    connecting: "Connecting…",
    open: "Connected",
    waiting: `Reconnecting in ${(detail.wait / 1000).toFixed(1)} s…`,
  }[detail.state];
  statusBadge.textContent = text;
  statusBadge.dataset.state = detail.state;
});

conn.addEventListener("welcome", async ({ detail: welcome }) => {
  whoami.textContent = welcome.name;
  lobby.welcomed(welcome);
  for (const id of welcome.tables) store.resync(id).catch(() => {});
  if (current && current.mode === "watch" && !welcome.tables.includes(current.id)) {
    const reply = await ctx.send({ type: "spectate", table: current.id, invite: current.invite ?? null });
    if (!reply) ctx.lobby();
  } else if (current && !welcome.tables.includes(current.id)) {
    ctx.lobby();
  }
  show();
});

conn.addEventListener("message", ({ detail: message }) => {
  if (store.apply(message)) return;
  if (message.type === "lobby" || message.type === "tables" || message.type === "leaderboard") {
    lobby.receive(message);
  } else if (message.type === "shutdown") {
    toast(`The server is restarting: ${message.reason}`);
  }
});

conn.addEventListener("error", ({ detail }) => toast(detail));

store.addEventListener("change", ({ detail: id }) => {
  if (current && current.id === id && !store.get(id)) ctx.lobby(); // gone: closed or left
  else if (current && current.id === id) show();
  else if (!current) lobby.tablesChanged();
});

store.addEventListener("event", ({ detail: { table, event } }) => {
  if (event.type === "game_started") {
    resetPiles(table);
    resetBlueJacket(table);
  }
  if (event.type === "game_over" && !current) lobby.refreshLeaderboards();
  if (current && current.id === table && event.type === "timed_out") {
    toast(describeEvent(store.get(table), event));
  }
  if (event.type === "table_closed") {
    if (!leaving.has(table)) toast(describeEvent(store.get(table), event));
    store.forget(table);
    if (current && current.id === table) ctx.lobby();
  }
});

document.getElementById("rename").addEventListener("submit", (e) => {
  e.preventDefault();
  const field = e.target.elements.name;
  const name = field.value.trim();
  if (!name) return;
  const held = [...store.tables.keys()];
  if (held.length && !confirm("A new name makes you a new guest: you lose your seats. Go on?")) return;
  for (const id of held) store.forget(id);
  current = null;
  sessionStorage.removeItem(CURRENT_KEY);
  conn.renew(name);
  field.value = "";
});

setInterval(() => {
  for (const node of document.querySelectorAll("[data-deadline]")) {
    const left = Math.max(0, Number(node.dataset.deadline) - conn.serverNow());
    const total = Number(node.dataset.total) || 30;
    node.querySelector(".seconds").textContent = `${Math.ceil(left)} s`;
    const bar = node.querySelector(".bar");
    if (bar) bar.style.width = `${Math.min(100, (100 * left) / total)}%`;
    node.classList.toggle("urgent", left < 5);
  }
}, 250);

document.querySelector(".top h1 a").addEventListener("click", (e) => {
  e.preventDefault();
  ctx.lobby();
});

// For debugging and the browser tests: the table on screen, as the client holds it.
window.blackdrez = { conn, store, ctx, table: () => (current ? store.get(current.id) ?? null : null) };
show();
conn.start();
