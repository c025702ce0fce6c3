// The browser client: connection, table state, the screen now shown (lobby, a table, an arena's
// page or a records page), and what the whole page does: messages (toasts) in words, the "your
// turn" signals, keyboard shortcuts, the rules dialog and the player's settings (theme, sound).

import { Connection, isAccount } from "./net.js";
import { TableStore } from "./tables.js";
import { h, swap } from "./dom.js";
import { Lobby } from "./lobby.js";
import { GAME_NAMES } from "./games.js";
import { renderBlackDrez } from "./blackdrez.js";
import { renderPiles, resetPiles } from "./piles.js";
import { renderBlueJacket, resetBlueJacket } from "./bluejacket.js";
import { renderGeneric } from "./generic.js";
import { showHelp } from "./help.js";
import { ask } from "./ask.js";
import { motion } from "./motion.js";
import { THEMES, applyTheme, setSound, setTheme, signalTurn, soundOn, theme } from "./prefs.js";
import { describeEvent, errorText, tableName } from "./words.js";
import { recordsRoute, renderRecords } from "./records.js";
import { followChat } from "./chat.js";
import { arenaRoute } from "./arena.js";
import { Friends } from "./friends.js";

const CURRENT_KEY = "blackdrez.current";
const TABLE_ROUTE = /^#\/table\/([^/]+)$/; // a table's address (see "addresses" below)
// A game with no renderer of its own here is drawn by the generic one (its view's fields and a
// button per legal action).
const RENDERERS = { blackdrez: renderBlackDrez, blackjack_piles: renderPiles, blue_jacket: renderBlueJacket };

const conn = new Connection();
const store = new TableStore(conn);
const screen = document.getElementById("screen");
const statusBadge = document.getElementById("status");
const whoami = document.getElementById("whoami");
const toasts = document.getElementById("toasts");
const announcer = document.getElementById("announce");

/** What the app offers to the screens. */
const ctx = {
  conn,
  tableLink: (id) => tableLink(id),
  store,
  get me() { return conn.welcome?.player; },
  toast,
  announce,
  help: showHelp,
  shortcuts: {},
  /** Send a request; show its error as a sentence (unless ``handled(error)`` says it dealt
   * with it); resolve with the reply or null. The open
   * table answered ``not_found`` is gone (the store lost it): the page leaves it for the lobby,
   * as for a table that closed. ``unavailable`` (the server cannot reach its store) shows in the
   * header until a request succeeds. */
  async send(message, handled = null) {
    try {
      const reply = await conn.request(message);
      storeTrouble(false);
      return reply;
    } catch (error) {
      if (!handled?.(error)) toast(errorText(error));
      if (error.code === "unavailable") storeTrouble(true);
      if (error.code === "not_found" && current && message.table === current.id) {
        store.forget(current.id); // its change event opens the lobby
      }
      return null;
    }
  },
  act(table, action) { return ctx.send({ type: "act", table, action }); },
  /** Show a table (seated, or watching): its address is ``#/table/<id>``, a new entry of
   * the browser's history unless ``replace`` (the same place, or one that replaces a place
   * gone). */
  open(id, mode = "seat", invite = null, replace = false) {
    dismiss("hint");
    const again = current?.id === id && !recordsRoute();
    current = { id, mode, invite };
    sessionStorage.setItem(CURRENT_KEY, JSON.stringify(current));
    address(tableAddress(id), replace);
    show();
    if (!again) scrollTo(0, 0); // another screen: it opens at its top, not where the last one was scrolled
  },
  /** Show the lobby (address ``/``): a new history entry, or with ``replace`` one in place of
   * a table that is gone or was left (Back does not lead to it). */
  lobby(replace = false) {
    dismiss("hint");
    current = null;
    sessionStorage.removeItem(CURRENT_KEY);
    address("", replace);
    show();
    scrollTo(0, 0);
  },
  /** Show a place that is not a table (an arena's page, ``#/arena/<id>``): a new history
   * entry unless ``replace``. */
  go(hash, replace = false) {
    dismiss("hint");
    current = null;
    sessionStorage.removeItem(CURRENT_KEY);
    address(hash, replace);
    show();
    scrollTo(0, 0);
  },
  /** Keep a new token for this identity (sign up, sign out everywhere). */
  keep(session) {
    conn.keep(session);
    showName(session.name);
    showAccount();
  },
  /** Play as another identity from now on (sign in): greet again with its token. */
  become(session) {
    for (const id of [...store.tables.keys()]) store.forget(id);
    current = null;
    sessionStorage.removeItem(CURRENT_KEY);
    conn.become(session);
  },
  /** Become a new guest on this browser. */
  signOut() {
    for (const id of [...store.tables.keys()]) store.forget(id);
    current = null;
    sessionStorage.removeItem(CURRENT_KEY);
    conn.renew("");
  },
  /** Leave a table (asking first when a game is running there). */
  async leave(id) {
    const table = store.get(id);
    if (table?.info?.game === "blackdrez" && table.seat !== null && table.info.status === "playing"
      && !(await ask({ title: "Leave this table?", text: "A game is running: if you are still in the round, you withdraw at your next turn and your seat is then freed (at once if you are out of the round already).", yes: "Leave the table", no: "Stay", danger: true }))) return;
    leaving.add(id);
    const reply = await ctx.send({ type: "leave", table: id });
    if (reply) {
      store.forget(id);
      ctx.lobby(true);
    } else leaving.delete(id);
  },
};

const leaving = new Set(); // tables this client is leaving: their closing is no news
const fresh = new Map(); // table id -> events received since the table was last drawn
let current = placeOnLoad();
ctx.friends = new Friends(ctx); // (before the lobby: its Friends panel)
const lobby = new Lobby(ctx);
const arenas = lobby.arenas;

const MAX_TOASTS = 2;

/** A short message, where it covers no card (style.css); errors stay longer and can be
 * dismissed. A message already shown is not shown twice, nor two of one ``topic`` (a new hint
 * replaces the last), and at most MAX_TOASTS show: the newest replace the oldest. */
function toast(text, kind = "error", topic = null) {
  for (const old of [...toasts.children]) {
    if (old.dataset.text === text || (topic && old.dataset.topic === topic)) old.remove();
  }
  const note = h("div.toast", { class: kind, role: kind === "error" ? "alert" : "status", dataset: { text, ...(topic ? { topic } : {}) } },
    h("span", text),
    h("button.close", { "aria-label": "Dismiss", onclick: () => note.remove() }, "✕"));
  toasts.append(note);
  // The "playing elsewhere" notice stays until the player answers it.
  for (const old of [...toasts.children].filter((t) => t.id !== "replaced").slice(0, -MAX_TOASTS)) old.remove();
  const stay = kind === "error" ? 9000 : 6000;
  setTimeout(() => note.classList.add("fade"), stay);
  setTimeout(() => note.remove(), stay + 700);
}

/** Withdraw the messages of ``topic`` (a hint, once a move is made or its game left). */
function dismiss(topic) {
  for (const old of [...toasts.children]) if (old.dataset.topic === topic) old.remove();
}

/** Say something to screen-reader users without showing it (a persistent live region). */
function announce(text) {
  announcer.textContent = "";
  setTimeout(() => { announcer.textContent = text; }, 50);
}

// ------------------------------------------------------------------ addresses
// Every place has an address: the lobby ``/``, a table or a solitaire ``#/table/<id>``, an
// invite ``#/invite/<table>:<code>`` (joined, then replaced by the table's), an arena's page
// ``#/arena/<id>`` (arena.js; a private one's invite after ``?invite=``), and the records'
// pages (records.js: ``#/ratings``, ``#/player/<id>``, ``#/game/<id>``, ``#/account``). Back and
// Forward move between them (``hashchange``), a reload lands on the same place, and a place that
// is gone (a table closed, a seat lost) gives way to the lobby in the same history entry.

/** The table the address names (``#/table/<id>``), or null. */
function tableRoute(hash = location.hash) {
  const found = TABLE_ROUTE.exec(hash);
  return found ? decodeURIComponent(found[1]) : null;
}

/** The address of table ``id`` (the hash part). */
function tableAddress(id) { return `#/table/${encodeURIComponent(id)}`; }

/** The shareable address of table ``id``: the lobby's URL and the table's hash. */
function tableLink(id) { return `${location.origin}${location.pathname}${tableAddress(id)}`; }

/** Whether the address names no place: the lobby's (``/``, ``#``, ``#/``). */
function lobbyRoute(hash = location.hash) { return hash === "" || hash === "#" || hash === "#/"; }

/** Show ``hash`` in the address bar: a new entry of the browser's history, or with ``replace``
 * in place of this one. (``pushState`` fires no ``hashchange``: the caller shows the place.) */
function address(hash, replace = false) {
  const url = location.pathname + location.search + hash;
  if (hash === location.hash || (!hash && lobbyRoute())) return;
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
}

/** The place to show on loading the page: the table its address names (seated or watching
 * as this tab last was there; watching if it never was), else none (the lobby, or a records
 * page over it). */
function placeOnLoad() {
  const id = tableRoute();
  if (id === null) {
    sessionStorage.removeItem(CURRENT_KEY);
    return null;
  }
  const saved = JSON.parse(sessionStorage.getItem(CURRENT_KEY) || "null");
  return saved?.id === id ? saved : { id, mode: "watch", invite: null };
}

/** The address changed (Back, Forward, a link, a typed URL): show the place it names. */
function route() {
  const id = tableRoute();
  if (id !== null) {
    if (current?.id === id) show();
    else visit(id);
    return;
  }
  if ((lobbyRoute() || arenaRoute()) && current) {
    dismiss("hint");
    current = null;
    sessionStorage.removeItem(CURRENT_KEY);
  }
  show();
  joinByLink();
}

/** Go to table ``id`` named by the address: the player's own seat there, or else watch it
 * (a shared link); a table that cannot be watched leaves the lobby in its place. */
async function visit(id) {
  if (!conn.welcome) { // on the way: the welcome decides (seated there, or watch it)
    current = { id, mode: "watch", invite: null };
    show();
    return;
  }
  if (store.get(id)?.seat != null || conn.welcome.tables.includes(id)) {
    ctx.open(id, "seat", null, true);
    return;
  }
  await watchFromAddress(id);
}

/** Watch table ``id`` because the address names it; if it cannot be (gone, private), say so
 * and show the lobby in its place. */
async function watchFromAddress(id) {
  let refusal = null;
  const reply = await ctx.send({ type: "spectate", table: id, invite: current?.id === id ? current.invite ?? null : null }, (error) => { refusal = error; return true; });
  if (tableRoute() !== id) return; // the player went elsewhere meanwhile
  if (reply) ctx.open(reply.table.id, "watch", current?.invite ?? null, true);
  else {
    // (a spectator the host sent away is told so, not that the table is gone)
    toast(refusal?.code === "removed" ? errorText(refusal) : "That table is no longer there, or it is private: here is the lobby.", "info");
    ctx.lobby(true);
  }
}

// The skip link moves the focus without changing the address (a hash would name no place).
document.querySelector("a.skip")?.addEventListener("click", (event) => {
  event.preventDefault();
  screen.focus();
});

/** The header's account link: sign in, or the account's profile. */
function showAccount() {
  const link = document.getElementById("account-link");
  const welcome = conn.welcome;
  const claimed = conn.token && isAccount(conn.token);
  link.textContent = claimed ? "Profile" : "Sign in";
  link.href = claimed && welcome ? `#/player/${encodeURIComponent(welcome.player)}` : "#/account";
  // A guest's games have a page too (their profile): linked beside Sign in.
  let games = document.getElementById("my-games-link");
  if (!claimed && welcome) {
    if (!games) {
      games = h("a#my-games-link", "Your games");
      link.after(games); // (after: Sign in does not move when it appears)
    }
    games.href = `#/player/${encodeURIComponent(welcome.player)}`;
  } else games?.remove();
}

function show() {
  delete screen.dataset.arena;
  const arenaPage = arenaRoute();
  if (arenaPage) {
    document.body.dataset.screen = "arena";
    ctx.shortcuts = {};
    signalTurn(false);
    lobby.unmount();
    arenas.showPage(screen, arenaPage);
    return;
  }
  const page = recordsRoute();
  if (page) {
    document.body.dataset.screen = "records";
    signalTurn(false);
    lobby.unmount();
    arenas.away();
    renderRecords(ctx, page, screen);
    return;
  }
  document.body.dataset.screen = current ? "table" : "lobby";
  if (!current) {
    ctx.shortcuts = {};
    signalTurn(false);
    arenas.away();
    lobby.mount(screen);
    return;
  }
  lobby.unmount();
  const table = store.get(current.id);
  if (!table || !table.info) {
    arenas.away();
    swap(screen, h("p.loading", "Loading the table…"));
    return;
  }
  const game = table.info.game;
  const render = RENDERERS[game] ?? renderGeneric;
  screen.dataset.game = game;
  const events = fresh.get(table.id) ?? [];
  fresh.delete(table.id);
  const focus = arenas.focusKey();
  render(ctx, table, screen, events);
  // A table an arena made: the arena's bar, and its own Next game at the game's end (style.css
  // hides the table's "again" controls there).
  if (table.info.arena) {
    screen.dataset.arena = table.info.arena;
    arenas.placeBar(table, screen, focus);
  } else arenas.away();
  const myTurn = game === "blackdrez" && table.legal.length > 0;
  if (myTurn && !wasMyTurn) announce("Your turn.");
  wasMyTurn = myTurn;
  signalTurn(myTurn, game === "blackdrez" ? tableName(table.info) : table.info.name || GAME_NAMES[game]);
}
let wasMyTurn = false;

/** Show the connection's state in the header's badge. While waiting to reconnect it counts
 * down (its timer runs then only). Once connected, it says when the server cannot reach its
 * store: nothing the player does is saved until a request succeeds or an update arrives. */
function showStatus(state, wait = 0) {
  clearInterval(countdown);
  countdown = null;
  statusBadge.dataset.state = state === "moving" ? "waiting" : state;
  if (state === "waiting") {
    const until = Date.now() + wait;
    const tick = () => {
      statusBadge.textContent = `Reconnecting in ${(Math.max(0, until - Date.now()) / 1000).toFixed(1)} s…`;
    };
    tick();
    countdown = setInterval(tick, 100);
    return;
  }
  const busy = state === "open" && storeDown;
  statusBadge.textContent = busy ? "Connected · server busy" : STATUS_TEXT[state];
  statusBadge.title = busy ? "The server cannot save moves just now; it retries by itself." : "";
  if (busy) statusBadge.dataset.store = "down";
  else delete statusBadge.dataset.store;
}
const STATUS_TEXT = {
  connecting: "Connecting…", open: "Connected", moving: "Table moving…", replaced: "Playing elsewhere",
};
let countdown = null;
let storeDown = false;

/** Note whether the server could reach its store at the last request (or update). */
function storeTrouble(down) {
  if (down === storeDown) return;
  storeDown = down;
  if (statusBadge.dataset.state === "open") showStatus("open");
}

conn.addEventListener("status", ({ detail }) => {
  if (detail.state !== "open") storeDown = false; // a new connection: its node may be another
  showStatus(detail.state, detail.wait);
  document.getElementById("replaced")?.remove();
  if (detail.state === "replaced") {
    const note = h("div#replaced.toast.error", { role: "alert" },
      h("span", "You are playing as this identity in another tab or browser now, so this one stopped. "),
      h("button.play-here", { onclick: () => { note.remove(); conn.resume(); } }, "Play here"));
    toasts.append(note);
  }
});

// "Table moving…" while a request waits for its table to change node, and no longer.
conn.addEventListener("moving", () => showStatus("moving"));
conn.addEventListener("moved", () => {
  if (conn.connected && statusBadge.dataset.state === "waiting" && !countdown) showStatus("open");
});

/** The name the others see, in the header; on a phone a long one is cut short, so the line
 * also carries it whole as its title (shown on hover or a long press). */
function showName(name) {
  whoami.textContent = name;
  whoami.parentElement.title = `Playing as ${name}`;
}

conn.addEventListener("welcome", async ({ detail: welcome }) => {
  showName(welcome.name);
  showAccount();
  lobby.welcomed(welcome);
  ctx.friends.welcomed(welcome);
  for (const id of welcome.tables) store.resync(id).catch(() => {});
  if (current && welcome.tables.includes(current.id) && current.mode !== "seat") {
    current = { ...current, mode: "seat" };
    sessionStorage.setItem(CURRENT_KEY, JSON.stringify(current));
  } else if (current && !welcome.tables.includes(current.id)) {
    await watchFromAddress(current.id); // watching it, or a shared link: watch it (again)
  }
  show();
  joinByLink();
});

/** An invite link (``#/invite/<table>:<code>``, shown at a private table) opened: sit at its
 * table. The link is taken off the address first, so a reload does not join again. */
function joinByLink() {
  const found = /^#\/invite\/([^:/]+):([^:/]+)$/.exec(location.hash);
  if (!found || !conn.welcome) return;
  history.replaceState(null, "", location.pathname + location.search);
  const [, table, invite] = found;
  if (store.get(table)?.seat != null) ctx.open(table, "seat", null, true); // seated here already
  else lobby.join(table, { invite });
}

conn.addEventListener("message", ({ detail: message }) => {
  if (message.type !== "shutdown") storeTrouble(false); // pushed through the store's bus
  if (store.apply(message)) return;
  if (["lobby", "tables", "leaderboard", "match_found", "arena_standings"].includes(message.type)) {
    lobby.receive(message);
  } else if (message.type === "challenged" || message.type === "challenge_answered") {
    ctx.friends.receive(message);
  } else if (message.type === "shutdown") {
    toast("The server is restarting: you will be reconnected in a moment.", "info");
  }
});

followChat(ctx); // (after the listener above: a table's lines are taken in once it is updated)

conn.addEventListener("error", ({ detail }) => toast(errorText(detail)));

store.addEventListener("change", ({ detail: id }) => {
  if (current && current.id === id && !store.get(id)) ctx.lobby(true); // gone: closed or left
  else if (current && current.id === id) show();
  else if (!current) lobby.tablesChanged();
});

// A table the server no longer knows (its store lost it) is left like one that closed; the
// player on it is told why.
store.addEventListener("gone", ({ detail: id }) => {
  if (current && current.id === id) toast(errorText({ code: "not_found" }));
});

store.addEventListener("event", ({ detail: { table, event, names } }) => {
  if (!fresh.has(table)) fresh.set(table, []);
  fresh.get(table).push(event);
  if (current && current.id === table) dismiss("hint"); // a move: the hint was for the last position
  if (event.type === "game_started") {
    resetPiles(table);
    resetBlueJacket(table);
  }
  if (event.type === "game_over" && !current) lobby.refreshLeaderboards();
  if (event.type === "game_over") arenas.gameEnded(table);
  const here = current && current.id === table && store.get(table)?.info?.game === "blackdrez";
  if (here && event.type === "timed_out") toast(describeEvent(store.get(table), event, names), "info");
  if (here && ["round_won", "pot_split", "game_over"].includes(event.type)) announce(describeEvent(store.get(table), event, names));
  if (event.type === "table_closed") {
    if (!leaving.has(table)) toast(describeEvent(store.get(table), event, names), "info");
    store.forget(table);
    if (current && current.id === table) ctx.lobby(true);
  }
});

document.getElementById("rename").addEventListener("submit", async (e) => {
  e.preventDefault();
  const field = e.target.elements.name;
  const name = field.value.trim();
  if (!name) {
    field.setAttribute("aria-invalid", "true");
    field.focus();
    toast("Type a new name first (1 to 24 characters).", "info");
    return;
  }
  field.removeAttribute("aria-invalid");
  const held = [...store.tables.keys()];
  if (held.length && !(await ask({ title: "Play under a new name?", text: "A new name makes you a new guest: you lose your seats and games in progress.", yes: "Take the new name", no: "Keep my name", danger: true }))) return;
  for (const id of held) store.forget(id);
  current = null;
  sessionStorage.removeItem(CURRENT_KEY);
  conn.renew(name);
  field.value = "";
});

// Settings: theme and sound, remembered in localStorage.
const settings = document.getElementById("settings");
settings.append(
  h("label", h("span.visually-hidden", "Theme"),
    h("select", { id: "theme", "aria-label": "Theme", onchange: (e) => setTheme(e.target.value) },
      THEMES.map(([value, label]) => h("option", { value, selected: value === theme() }, label)))),
  h("label.check", h("input", { type: "checkbox", id: "sound", checked: soundOn(), onchange: (e) => setSound(e.target.checked) }), " Sound on your turn"),
  h("button", { type: "button", onclick: () => { settingsMenu.open = false; showHelp(current ? store.get(current.id)?.info?.game ?? "blackdrez" : "blackdrez"); } }, "Rules and help"));
applyTheme();
// The menu floats over the page (a phone's Quick join, a table's seats): it closes once left,
// as a menu does, not only when Settings is pressed again.
const settingsMenu = document.querySelector(".settings-menu");
document.addEventListener("click", (event) => {
  if (settingsMenu.open && !settingsMenu.contains(event.target)) settingsMenu.open = false;
});
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && settingsMenu.open) {
    settingsMenu.open = false;
    settingsMenu.querySelector("summary").focus();
  }
});
matchMedia("(prefers-color-scheme: dark)").addEventListener("change", applyTheme);

// Keyboard shortcuts of the screen on show (never while typing, nor with a modifier but Shift).
document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey || event.repeat) return;
  if (event.target.closest?.("input, select, textarea, dialog")) return;
  const keys = ctx.shortcuts;
  const single = keys[event.key.toLowerCase()];
  if (single && !event.shiftKey) {
    single();
    event.preventDefault();
  } else if (keys.key && keys.key(event)) event.preventDefault();
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

window.addEventListener("hashchange", route);

document.querySelector(".top h1 a").addEventListener("click", (e) => {
  e.preventDefault();
  ctx.lobby();
});

// For debugging and the browser tests: the table on screen, as the client holds it.
window.blackdrez = { conn, store, ctx, motion, arenas, table: () => (current ? store.get(current.id) ?? null : null) };
show();
conn.start();
