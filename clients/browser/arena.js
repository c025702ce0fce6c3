// Arenas: tournaments of a fixed length (protocol: create_arena, join_arena, leave_arena,
// watch_arena, unwatch_arena, list_arenas; answers arena and arenas, pushes arena_standings and,
// for the next table, match_found).
//
// Theory of operation. Arenas show in three places: the lobby's two panels (the public arenas of
// list_arenas, asked again every LIST_EVERY ms while the lobby is on screen, and the form that
// makes one), the arena's page at #/arena/<id> (a private arena's invite code after ?invite=,
// the address its maker sends), and a bar at a table the arena made (its info.arena). The page
// and the bar follow one arena at a time (watch_arena; unwatch_arena once neither shows it):
// each arena_standings push redraws them, and a change of the player's own rank is said to
// screen readers (once things settle, not at every push). Times are the server's
// (conn.serverNow); an arena's status is worked out from its start and end as the clock runs,
// since no push marks them.
//
// Playing is queueing: join_arena puts the player in the arena's queue. The wait is data, as
// find.js's search is (the arena, its invite, since when, the tables held then), kept in
// sessionStorage: after a reconnect or a reload within the server's KEEP seconds it asks again
// (the place is kept), or opens the table made meanwhile (one in the welcome not held before).
// match_found while waiting is said, then its table opened as find.js does. When a game at an
// arena table ends, Next game (or by itself AUTO_AFTER ms later with "Keep pairing me", if the
// player is still at that table or on the arena's page) asks to be paired again, shows the
// arena's page (the wait, and the standings that game moved), and leaves the finished table.
//
// The page lists the arena's games as the records stored them (GET /api/v1/games?arena=), each
// with its replay: asked when the page opens, every GAMES_EVERY ms while it runs, and GAMES_LAG
// ms after the standings count more places than the games listed hold (a game is stored moments
// after it is scored: asked again until it is there, GAMES_TRIES times at most).

import { h, swap } from "./dom.js";
import { KEEP, OPEN_AFTER, clock, foundWords } from "./find.js";
import { botTag } from "./rating.js";
import { api } from "./records.js";
import { count } from "./words.js";

const ROUTE = /^#\/arena\/([^/?#]+)(?:\?invite=([^&#]+))?$/;
const WAIT_KEY = "blackdrez.arena.wait";
const INVITES_KEY = "blackdrez.arena.invites";
const KEEP_PAIRING_KEY = "blackdrez.arena.keepPairing";
const MAX_INVITES = 20; // invite codes remembered (the newest)
const LIST_EVERY = 15000; // ms between two list_arenas while the lobby shows
const AUTO_AFTER = 5000; // ms from a game's end to the next pairing asked by itself
const RANK_SETTLE = 1500; // ms a new rank must hold before it is said
const GAMES_LAG = 1500; // ms from a game scored to its games list asked (it is stored by then)
const GAMES_EVERY = 20000; // ms between two games lists while a running arena's page shows
const GAMES_SHOWN = 20; // games listed on the page (the newest)
const GAMES_TRIES = 10; // lists asked for one count of places before waiting for GAMES_EVERY
const STATUS_ORDER = { running: 0, upcoming: 1, finished: 2 };
const ERRORS = {
  not_found: "There is no such arena: the link may be wrong, or it ended more than a day ago.",
  invite_required: "This arena is private: open it with the invite link its maker sends.",
  arena_over: "This arena has ended: its standings are final.",
};

/** The arena page the address names (``#/arena/<id>``, ``?invite=<code>`` for a private one),
 * or null. */
export function arenaRoute(hash = location.hash) {
  const found = ROUTE.exec(hash);
  if (!found) return null;
  return { id: decodeURIComponent(found[1]), invite: found[2] ? decodeURIComponent(found[2]) : null };
}

/** The address (hash) of arena ``id``'s page. */
export function arenaAddress(id, invite = null) {
  return `#/arena/${encodeURIComponent(id)}${invite ? `?invite=${encodeURIComponent(invite)}` : ""}`;
}

/** "upcoming", "running" or "finished" at ``now`` (server seconds). */
function statusAt(info, now) {
  return now < info.starts ? "upcoming" : now < info.ends ? "running" : "finished";
}

/** "ends in 12:34", "starts in 0:45", "starts Fri 18:30", "ended 17:05". */
function timeText(info, now) {
  const status = statusAt(info, now);
  if (status === "running") return `ends in ${duration(info.ends - now)}`;
  if (status === "upcoming") {
    const wait = info.starts - now;
    return wait < 3600 ? `starts in ${duration(wait)}` : `starts ${moment(info.starts)}`;
  }
  return `ended ${moment(info.ends)}`;
}

function duration(seconds) {
  const whole = Math.max(0, Math.ceil(seconds));
  if (whole < 3600) return clock(whole);
  return `${Math.floor(whole / 3600)} h ${String(Math.floor((whole % 3600) / 60)).padStart(2, "0")} min`;
}

/** A time of day in the player's own zone, with the day unless it is today. */
function moment(seconds) {
  const date = new Date(seconds * 1000);
  const time = date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  if (date.toDateString() === new Date().toDateString()) return `at ${time}`;
  return `${date.toLocaleDateString([], { weekday: "short", day: "numeric", month: "short" })} ${time}`;
}

function capital(text) { return text.charAt(0).toUpperCase() + text.slice(1); }

/** "1st", "2nd", "3rd", "11th". */
function ordinal(n) {
  const tens = n % 100;
  const suffix = tens >= 11 && tens <= 13 ? "th" : { 1: "st", 2: "nd", 3: "rd" }[n % 10] ?? "th";
  return `${n}${suffix}`;
}

/** The time of ``info`` as text that the ticker keeps up to date. */
function timeSpan(info, now, { page = false } = {}) {
  const text = timeText(info, now);
  return h("span.arena-time", { dataset: { starts: info.starts, ends: info.ends, ...(page ? { capital: "1" } : {}) } },
    page ? capital(text) : text);
}

/** Its status as a pill (the ticker turns it when the arena starts or ends). */
function statusPill(info, now) {
  const status = statusAt(info, now);
  return h("span.status.arena-status", { dataset: { status, starts: info.starts, ends: info.ends } }, status);
}

function kindBadge(info) {
  return info.rated
    ? h("span.badge.rated", { title: "A rated arena: each game moves its players' ratings" }, "rated")
    : h("span.badge", { title: "Casual: ratings do not move" }, "casual");
}

/** The on-fire mark: seen as a flame and the words, read as the words. */
function fire() {
  return h("span.fire", { title: "On fire: two wins in a row, so the next win scores double" },
    h("span", { "aria-hidden": "true" }, "🔥"), " on fire");
}

function field(label, input) {
  return h("label.field", h("span", label), input);
}

function readInvites() {
  try {
    const invites = JSON.parse(localStorage.getItem(INVITES_KEY) || "{}");
    return invites && typeof invites === "object" ? invites : {};
  } catch {
    return {};
  }
}

/** The wait kept by this tab, unless its place is lost by now (KEEP seconds after this page
 * last saw it, as find.js's search). */
function restoreWait() {
  try {
    const wait = JSON.parse(sessionStorage.getItem(WAIT_KEY) || "null");
    if (wait && Date.now() - wait.seen < KEEP * 1000) return wait;
  } catch { /* unreadable: no wait */ }
  sessionStorage.removeItem(WAIT_KEY);
  return null;
}

export class Arenas {
  constructor(ctx, lobby) {
    this.ctx = ctx;
    this.lobby = lobby;
    this.known = new Map(); // arena id -> {arena, standings, invite}: the last answer or push
    this.problems = new Map(); // arena id -> the error code its watch_arena got
    this.listed = null; // the public arenas (list_arenas), null until the first answer
    this.invites = readInvites(); // arena id -> invite code (private arenas opened by their link)
    this.waiting = restoreWait(); // {arena, invite, player, since, known, seen} while queued
    this.watched = null; // the arena whose standings are pushed to this page
    this.page = null; // {id, key, root, status}: the arena page on screen
    this.bar = null; // {table, arena}: the arena table on screen
    this.auto = null; // {table, arena, at}: the next pairing asked by itself at `at` (Date.now)
    this.autoTimer = null;
    this.listBox = null;
    this.listTimer = null;
    this.rankTimer = null;
    this.games = new Map(); // arena id -> {list, played, at}: its stored games (null: no records)
    this.gamesTimer = null;
    setInterval(() => this.tick(), 500);
  }

  /** Whether the next pairing is asked by itself after each game ("Keep pairing me", on unless
   * the player turned it off). */
  get keepPairing() { return localStorage.getItem(KEEP_PAIRING_KEY) !== "0"; }

  /** The address of arena ``id``'s page, with its invite when this browser knows it. */
  address(id) { return arenaAddress(id, this.invites[id] ?? null); }

  /** Keep ``invite`` for arena ``id`` (the newest MAX_INVITES kept). */
  rememberInvite(id, invite) {
    if (!invite || this.invites[id] === invite) return;
    delete this.invites[id];
    this.invites[id] = invite;
    const kept = Object.entries(this.invites).slice(-MAX_INVITES);
    this.invites = Object.fromEntries(kept);
    localStorage.setItem(INVITES_KEY, JSON.stringify(this.invites));
  }

  /** After each welcome: watches died with the old connection (the screen's next drawing asks
   * again); a wait asks again (the place is kept), or opens the table made meanwhile. */
  welcomed(welcome) {
    this.watched = null;
    const wait = this.waiting;
    if (wait && wait.player && wait.player !== welcome.player) this.stopWaiting(); // another identity now
    else if (wait) {
      wait.player = welcome.player;
      const made = welcome.tables.find((id) => !wait.known.includes(id));
      if (made) {
        this.stopWaiting();
        this.ctx.toast("Your arena table was made while you were away: here it is.", "info");
        this.ctx.announce("Your arena table was made while you were away.");
        setTimeout(() => this.lobby.join(made), OPEN_AFTER);
      } else this.ask();
    }
    if (this.listBox?.isConnected) this.refreshList();
  }

  /** An arena_standings push (or an answer carrying an arena). */
  receive(message) {
    this.take(message);
    this.redraw();
  }

  /** The queue made the player's arena table: say so, then open it as find.js does. */
  found(message) {
    const text = foundWords(message, "Your arena table");
    this.stopWaiting();
    this.ctx.toast(text, "info");
    this.ctx.announce(text);
    setTimeout(() => this.lobby.join(message.table), OPEN_AFTER);
  }

  /** Keep what ``message`` (arena, or arena_standings) says of its arena. */
  take(message) {
    const id = message.arena.id;
    const old = this.known.get(id);
    const entry = { arena: message.arena, standings: message.standings, invite: message.invite ?? old?.invite ?? null };
    this.known.set(id, entry);
    this.problems.delete(id);
    if (entry.invite) this.rememberInvite(id, entry.invite);
    if (old && id === this.watched) this.rankNews(old, entry);
  }

  /** Say the player's new rank, once it has held a moment (not at every push). */
  rankNews(old, entry) {
    const me = this.ctx.me;
    const before = old.standings.find((s) => s.player === me)?.rank;
    const after = entry.standings.find((s) => s.player === me);
    if (!before || !after || before === after.rank) return;
    clearTimeout(this.rankTimer);
    this.rankTimer = setTimeout(() => {
      const now = this.known.get(entry.arena.id)?.standings.find((s) => s.player === me);
      if (now && this.watched === entry.arena.id) {
        this.ctx.announce(`You are now ${ordinal(now.rank)} in ${entry.arena.name}, with ${count(now.points, "point")}.`);
      }
    }, RANK_SETTLE);
  }

  // ---------------------------------------------------------------- following one arena
  /** Follow arena ``id`` (null: none): its standings pushed here, the last one's no more. */
  async need(id, again = false) {
    if (this.watched === id && !again) return;
    const old = this.watched;
    this.watched = id;
    if (old && old !== id && this.ctx.conn.connected) this.ctx.conn.request({ type: "unwatch_arena", arena: old }).catch(() => {});
    if (!id) return;
    if (!this.ctx.conn.connected) {
      this.watched = null; // the drawing after the next welcome asks
      return;
    }
    let refusal = null;
    const reply = await this.ctx.send({ type: "watch_arena", arena: id, invite: this.invites[id] ?? null }, (error) => { refusal = error; return true; });
    if (reply) this.take(reply);
    else if (refusal?.code === "closed") {
      if (this.watched === id) this.watched = null;
    } else this.problems.set(id, refusal?.code ?? "internal");
    if (this.watched !== id && reply && this.ctx.conn.connected) {
      // Gone elsewhere meanwhile: the answer watches it all the same.
      this.ctx.conn.request({ type: "unwatch_arena", arena: id }).catch(() => {});
    }
    this.redraw();
  }

  /** The screen shows neither an arena's page nor one of its tables. */
  away() {
    this.page = null;
    this.bar = null;
    this.need(null);
  }

  /** Draw again whatever shows an arena (the page, a table's bar). */
  redraw() {
    this.renderPage();
    this.renderBar();
  }

  /** A table held here changed (the page says whether the player sits at one of the arena's). */
  tablesChanged() { this.renderPage(); }

  // ---------------------------------------------------------------- queueing
  /** Enter arena ``id``'s queue (join_arena): the reply, or null (refused, said in words). */
  async join(id) {
    const invite = this.invites[id] ?? null;
    if (this.lobby.finder.search) this.lobby.finder.stop(); // one place in the queue: the arena's now
    let refusal = null;
    const reply = await this.ctx.send({ type: "join_arena", arena: id, invite }, (error) => { refusal = error; return error.code in ERRORS; });
    if (!reply) {
      if (refusal?.code in ERRORS) this.ctx.toast(ERRORS[refusal.code], refusal.code === "arena_over" ? "info" : "error");
      this.redraw();
      return null;
    }
    this.take(reply);
    const tables = [...new Set([...(this.ctx.conn.welcome?.tables ?? []), ...this.ctx.store.tables.keys()])];
    const since = this.waiting?.arena === id ? this.waiting.since : this.ctx.conn.serverNow();
    this.waiting = { arena: id, invite, player: this.ctx.me ?? null, since, known: tables, seen: Date.now() };
    this.saveWait();
    this.ctx.announce(reply.arena.status === "upcoming" ? "You joined the arena: your first table comes at its start." : "Waiting for your table.");
    this.redraw();
    return reply;
  }

  /** Join from the arena's page: the focus on Leave arena, in the place of Join (as find.js's
   * Cancel). */
  async joinHere(id) {
    if (!(await this.join(id))) return;
    document.getElementById("arena-leave")?.focus();
    this.tidy(id);
  }

  /** Ask again for the wait's place (after a reconnect). */
  async ask() {
    const wait = this.waiting;
    if (!wait || !this.ctx.conn.connected) return;
    let refusal = null;
    const reply = await this.ctx.send({ type: "join_arena", arena: wait.arena, invite: wait.invite }, (error) => { refusal = error; return true; });
    if (this.waiting !== wait) {
      // Matched or left while the question was on its way: it queued the player again.
      if (reply && !this.waiting) this.ctx.conn.request({ type: "cancel_find" }).catch(() => {});
      return;
    }
    if (reply) this.take(reply);
    else if (refusal?.code !== "closed") { // (the connection dropped: the next welcome asks again)
      this.stopWaiting();
      this.ctx.toast(ERRORS[refusal?.code] ?? "You are no longer waiting for an arena table: join again.", "info");
    }
    this.redraw();
  }

  /** The wait is over (matched, left, the arena ended, or a search for a game began). */
  stopWaiting() {
    if (!this.waiting) return;
    this.waiting = null;
    sessionStorage.removeItem(WAIT_KEY);
    this.redraw();
  }

  /** Note the wait in sessionStorage (seen now, with the tables held by now). */
  saveWait() {
    const wait = this.waiting;
    if (!wait) return;
    wait.seen = Date.now();
    for (const id of this.ctx.store.tables.keys()) if (!wait.known.includes(id)) wait.known.push(id);
    sessionStorage.setItem(WAIT_KEY, JSON.stringify(wait));
  }

  /** Leave arena ``id`` (leave_arena): no more pairings, the points stay. */
  async leave(id) {
    const reply = await this.ctx.send({ type: "leave_arena", arena: id });
    if (!reply) return;
    if (this.waiting?.arena === id) this.stopWaiting();
    if (this.auto?.arena === id) this.cancelAuto();
    const text = "You left the arena: your points stay in its standings.";
    this.ctx.toast(text, "info");
    this.ctx.announce(text);
    this.redraw();
    document.getElementById("arena-join")?.focus();
  }

  /** Next game from a finished arena table: queue again, show the arena's page (the wait and the
   * standings), leave the table (once off it: leaving the table on screen shows the lobby). */
  async nextGame(table, id) {
    this.cancelAuto();
    await this.join(id);
    this.ctx.go(this.address(id), true); // (in the place of the table, which is left)
    this.tidy(id);
  }

  /** Leave the arena's tables whose game is over (their results are in the standings). */
  tidy(id) {
    for (const table of [...this.ctx.store.tables.values()]) {
      if (table.info?.arena !== id || table.seat === null || table.info.status === "playing") continue;
      this.ctx.send({ type: "leave", table: table.id }, () => true).then((left) => {
        if (left) this.ctx.store.forget(table.id);
      });
    }
  }

  /** The player turned "Keep pairing me" on or off. */
  setKeepPairing(on) {
    localStorage.setItem(KEEP_PAIRING_KEY, on ? "1" : "0");
    if (!on) this.cancelAuto();
    this.redraw();
  }

  /** A game ended at ``tableId`` (news, not a reload): at an arena table, with Keep pairing me,
   * the next pairing is asked AUTO_AFTER ms later, if the player is still there or on the
   * arena's page. */
  gameEnded(tableId) {
    const table = this.ctx.store.get(tableId);
    const id = table?.info?.arena;
    if (!id || table.seat === null || !this.keepPairing) return;
    const info = this.known.get(id)?.arena;
    if (info && statusAt(info, this.ctx.conn.serverNow()) === "finished") return;
    this.cancelAuto();
    this.auto = { table: tableId, arena: id, at: Date.now() + AUTO_AFTER };
    this.autoTimer = setTimeout(() => {
      const auto = this.auto;
      this.auto = null;
      if (!auto) return;
      const here = location.hash === `#/table/${encodeURIComponent(auto.table)}` || arenaRoute()?.id === auto.arena;
      if (here && this.keepPairing) this.nextGame(auto.table, auto.arena);
      else this.redraw();
    }, AUTO_AFTER);
  }

  /** No next pairing asked by itself (the player asked, left, or turned it off). */
  cancelAuto() {
    clearTimeout(this.autoTimer);
    this.auto = null;
  }

  // ---------------------------------------------------------------- the lobby's panels
  /** The lobby's panel of public arenas (built with the lobby, once per visit). */
  listPanel() {
    this.listBox = h("div.arena-list");
    this.renderList();
    return h("section.panel.arenas-panel", { "aria-labelledby": "arenas-title" },
      h("div.panel-head", h("h2#arenas-title", "Arenas")),
      h("p.muted.arenas-intro", "Tournaments against the clock: you are paired again as soon as your game ends, and every game scores."),
      this.listBox);
  }

  /** The lobby's panel that makes an arena. */
  createPanel() {
    const submit = (e) => {
      e.preventDefault();
      this.create(e.target);
    };
    return h("section.panel.arena-create-panel", { "aria-labelledby": "arena-create-title" },
      h("h2#arena-create-title", "Create an arena"),
      h("form#create-arena", { onsubmit: submit },
        field("Name", h("input", { name: "name", maxlength: "64", placeholder: "Friday evening", autocomplete: "off" })),
        h("div.row",
          field("Minutes", h("input", { name: "minutes", type: "number", min: "1", max: "240", value: "30", required: true })),
          field("Seats", h("input", { name: "seats", type: "number", min: "2", max: "8", value: "4", required: true, title: "The size of each table the arena makes" })),
          field("Starts in (min)", h("input", { name: "starts_in", type: "number", min: "0", max: "10080", value: "0", required: true }))),
        h("div.row",
          h("label.check", { title: "Each game's result moves the players' ratings" }, h("input", { name: "rated", type: "checkbox" }), " Rated"),
          h("label.check", { title: "Not listed: only who has its link can join or watch" }, h("input", { name: "private", type: "checkbox" }), " Private (invite link only)")),
        h("button.primary", { type: "submit" }, "Create arena")));
  }

  /** Make the arena the form describes (create_arena) and show its page. */
  async create(form) {
    const f = form.elements;
    const options = {
      name: f.name.value.trim() || `${this.ctx.conn.welcome?.name ?? "My"}’s arena`,
      minutes: Number(f.minutes.value),
      seats: Number(f.seats.value),
      rated: f.rated.checked,
      private: f.private.checked,
      starts_in: Number(f.starts_in.value) * 60,
    };
    // (making arenas is rate-limited: a few at once, then one a minute)
    const reply = await this.ctx.send({ type: "create_arena", options }, (error) => {
      if (error.code !== "rate_limited") return false;
      const wait = Math.ceil(error.retry_after ?? 60);
      this.ctx.toast(`You made arenas just now: you can make another in ${count(wait, "second")}.`);
      return true;
    });
    if (!reply) return;
    this.take(reply);
    if (!reply.arena.private && this.listed) this.listed = [...this.listed.filter((a) => a.id !== reply.arena.id), reply.arena];
    this.ctx.go(this.address(reply.arena.id));
  }

  /** Ask for the public arenas, and again every LIST_EVERY ms while the list shows. */
  async refreshList() {
    clearTimeout(this.listTimer);
    if (!this.listBox?.isConnected) return;
    if (this.ctx.conn.connected) {
      const reply = await this.ctx.send({ type: "list_arenas" }, () => true);
      if (reply) {
        this.listed = reply.arenas;
        this.renderList();
      }
    }
    clearTimeout(this.listTimer);
    if (this.listBox?.isConnected) this.listTimer = setTimeout(() => this.refreshList(), LIST_EVERY);
  }

  /** Draw the public arenas, running first, then upcoming, then finished (the latest first). */
  renderList() {
    if (!this.listBox) return;
    if (this.listed === null) {
      swap(this.listBox, h("p.empty", "Looking for arenas…"));
      return;
    }
    if (!this.listed.length) {
      swap(this.listBox, h("p.empty", "No arenas just now: create one, then send its link."));
      return;
    }
    const now = this.ctx.conn.serverNow();
    const order = (a) => STATUS_ORDER[statusAt(a, now)];
    const rows = [...this.listed].sort((a, b) => order(a) - order(b) || (order(a) === 2 ? b.ends - a.ends : a.ends - b.ends));
    swap(this.listBox, h("ul.arenas", rows.map((a) => h("li.arena-row", { dataset: { arena: a.id } },
      h("div.table-name",
        h("a.arena-link", { href: this.address(a.id), dataset: { key: `arena-${a.id}` } }, a.name),
        statusPill(a, now), kindBadge(a)),
      h("div.table-meta", timeSpan(a, now), ` · tables of ${a.seats}`, a.players ? ` · ${count(a.players, "player")}` : "")))));
  }

  // ---------------------------------------------------------------- the arena's page
  /** Show the page of ``route`` ({id, invite}) in ``screen``. */
  showPage(screen, route) {
    this.bar = null;
    const fresh = route.invite && this.invites[route.id] !== route.invite;
    if (route.invite) this.rememberInvite(route.id, route.invite);
    const key = `${route.id}|${this.ctx.me ?? ""}`;
    if (!(this.page?.key === key && screen.contains(this.page.root))) {
      delete screen.dataset.game;
      this.page = { id: route.id, key, root: h("div.arena-page"), status: null };
      swap(screen, this.page.root);
    }
    this.renderPage();
    this.need(route.id, fresh || this.problems.has(route.id));
  }

  /** Draw the arena's page on screen from what is known of it (or why it cannot be shown). */
  renderPage() {
    const page = this.page;
    if (!page || !page.root.isConnected) return;
    const entry = this.known.get(page.id);
    const problem = this.problems.get(page.id);
    const lobbyLink = h("p.arena-foot", h("a", { href: "#", dataset: { key: "arena-lobby" }, onclick: (e) => { e.preventDefault(); this.ctx.lobby(); } }, "Back to the lobby"));
    if (problem && !entry) {
      swap(page.root, h("section.panel.arena-problem", { "aria-labelledby": "arena-title" },
        h("h2#arena-title", problem === "invite_required" ? "A private arena" : "Arena not found"),
        h("p", { role: "alert" }, ERRORS[problem] ?? "This arena cannot be shown just now: try again."),
        lobbyLink));
      return;
    }
    if (!entry) {
      swap(page.root, h("p.loading", "Loading the arena…"));
      return;
    }
    const now = this.ctx.conn.serverNow();
    const info = entry.arena;
    const status = statusAt(info, now);
    page.status = status;
    const me = this.ctx.me;
    const mine = entry.standings.find((s) => s.player === me) ?? null;
    const minutes = Math.round((info.ends - info.starts) / 60);
    const players = entry.standings.length;
    swap(page.root,
      h("section.panel.arena-head", { "aria-labelledby": "arena-title" },
        h("div.arena-title-row",
          h("h2#arena-title", info.name),
          statusPill(info, now), kindBadge(info),
          info.private ? h("span.badge.private", { title: "Not listed: only who has its link can join or watch" }, "private") : null),
        h("p.arena-clock", { role: "timer" }, timeSpan(info, now, { page: true })),
        h("p.arena-facts.muted", `${count(minutes, "minute")} · tables of ${info.seats} · ${count(players, "player")}`),
        entry.invite ? this.inviteLine(info, entry.invite) : null,
        this.meBlock(info, status, mine)),
      h("section.panel.standings-panel", { "aria-labelledby": "standings-title" },
        h("div.panel-head",
          h("h2#standings-title", status === "finished" ? "Final standings" : "Standings"),
          mine ? h("span.muted.arena-mine", `You: ${ordinal(mine.rank)} of ${players}, ${count(mine.points, "point")}`) : null),
        standingsTable(entry.standings, me),
        h("p.muted.arena-rules", "Each game scores a point for every player you finish above. Two wins in a row and you are on fire: your wins score double until a game you do not win. Equal points: most wins first, then most games.")),
      this.gamesPanel(info, status, entry.standings),
      lobbyLink);
  }

  /** The arena's games as stored, newest first, each with its replay (asked as the module's
   * head says). */
  gamesPanel(info, status, standings) {
    const id = info.id;
    const played = standings.reduce((sum, s) => sum + s.games, 0); // places scored
    const known = this.games.get(id);
    if (!known) this.fetchGames(id, played);
    else if (known.placed < played && known.tries < GAMES_TRIES && !this.gamesTimer) {
      this.gamesTimer = setTimeout(() => this.fetchGames(id, played), GAMES_LAG);
    } else if (status === "running" && Date.now() - known.at > GAMES_EVERY) this.fetchGames(id, played);
    const list = known?.list;
    const body = list === undefined ? h("p.muted", "Looking for its games…")
      : list === null ? h("p.muted", "Its games cannot be listed: this server keeps no records.")
      : !list.length && played ? h("p.muted", "Its games are being stored: they show here in a moment.")
      : !list.length ? h("p.empty", status === "finished" ? "No game was played in this arena." : "No game has ended yet.")
      : h("ul.games.arena-games", list.map((game) => arenaGameRow(game, this.ctx.me)));
    return h("section.panel.arena-games-panel", { "aria-labelledby": "arena-games-title" },
      h("div.panel-head", h("h2#arena-games-title", "Games"),
        list?.length ? h("span.muted", list.length < GAMES_SHOWN ? count(list.length, "game") : `the latest ${GAMES_SHOWN}`) : null),
      body);
  }

  /** Ask for arena ``id``'s stored games (once at a time), then draw the page again. */
  async fetchGames(id, played) {
    clearTimeout(this.gamesTimer);
    this.gamesTimer = null;
    const known = this.games.get(id);
    if (known?.busy) return;
    this.games.set(id, { list: undefined, placed: 0, tries: 0, ...known, at: Date.now(), busy: true });
    let list = known?.list;
    try {
      list = (await api(`games?arena=${encodeURIComponent(id)}&limit=${GAMES_SHOWN}`)).games;
    } catch (error) {
      if (error.status === 404) list = null; // no records API on this server
    }
    // The places the list holds (all of them once it is whole), to know whether it is behind.
    const whole = list === null || (list && list.length < GAMES_SHOWN);
    const placed = whole ? (list ?? []).reduce((sum, g) => sum + g.players.filter((p) => p.place !== null).length, 0) : played;
    const tries = known?.played === played ? (known.tries ?? 0) + 1 : 1;
    this.games.set(id, { list, played, placed: list === null ? Infinity : placed, tries, at: Date.now(), busy: false });
    if (this.page?.id === id) this.renderPage();
  }

  /** What the player can do here: join, wait, go back to their table, leave. */
  meBlock(info, status, mine) {
    const id = info.id;
    const leave = h("button#arena-leave", { type: "button", dataset: { key: "arena-leave" }, title: "Stop being paired: your points stay", onclick: () => this.leave(id) }, "Leave arena");
    if (status === "finished") {
      return h("div.arena-me",
        h("button#arena-join.primary", { type: "button", disabled: true, "aria-describedby": "arena-why", dataset: { key: "arena-join" } }, "Join"),
        h("p#arena-why.why", mine
          ? `This arena has ended: you finished ${ordinal(mine.rank)} with ${count(mine.points, "point")}.`
          : "This arena has ended: its standings are final, nobody can join now."));
    }
    if (this.waiting?.arena === id) {
      return h("div.arena-me.find-status",
        h("p.find-title", h("span.find-dot", { "aria-hidden": "true" }), h("strong", "Waiting for your table… "),
          h("span.find-clock.arena-wait-clock", clock(Math.max(0, this.ctx.conn.serverNow() - this.waiting.since)))),
        h("p.muted", status === "upcoming"
          ? "The arena has not started: your first table is made at its start."
          : `Your table is made as soon as ${info.seats === 2 ? "another player" : `${info.seats - 1} players`} of the arena ${info.seats === 2 ? "is" : "are"} free.`),
        this.keepBox(),
        h("div.buttons", leave));
    }
    const playing = [...this.ctx.store.tables.values()].find((t) => t.info?.arena === id && t.seat !== null && t.info.status === "playing");
    if (playing) {
      return h("div.arena-me",
        h("p", "Your game in this arena is on."),
        h("div.buttons",
          h("button#arena-open.primary", { type: "button", dataset: { key: "arena-open" }, onclick: () => this.ctx.open(playing.id, "seat") }, "Back to your table"),
          leave),
        this.keepBox());
    }
    const inside = mine?.active ?? false;
    return h("div.arena-me",
      h("div.buttons",
        h("button#arena-join.primary", { type: "button", dataset: { key: "arena-join" }, onclick: () => this.joinHere(id) }, inside ? "Next game" : "Join"),
        inside ? leave : null),
      h("p.muted", inside
        ? "You are in this arena: press Next game to be paired for your next table."
        : status === "upcoming"
          ? "Join now: you are paired from its start."
          : "Join to be paired with the arena's players as soon as you are free."),
      this.keepBox());
  }

  /** The "Keep pairing me" check box (one shows at a time: the page's, or the table's). */
  keepBox() {
    return h("label.check.keep-pairing", { title: "After each game at an arena table, ask for the next table by itself a few seconds later" },
      h("input#arena-keep", { type: "checkbox", checked: this.keepPairing, dataset: { key: "arena-keep" }, onchange: (e) => this.setKeepPairing(e.target.checked) }),
      " Keep pairing me");
  }

  /** The maker's invite link to a private arena, with a Copy button. */
  inviteLine(info, invite) {
    const link = `${location.origin}${location.pathname}${arenaAddress(info.id, invite)}`;
    const input = h("input#arena-invite-link", { readonly: true, value: link, "aria-label": "Invite link to send", onfocus: (e) => e.target.select() });
    return h("div.share.arena-invite",
      h("label", { for: "arena-invite-link" }, "Invite link:"), input,
      h("button.copy", { type: "button", id: "copy-arena-link", dataset: { key: "copy-arena-link" }, title: "Copy the invite link: whoever opens it can join this arena", onclick: () => this.copy(link, input) }, "Copy link"));
  }

  async copy(link, input) {
    try {
      await navigator.clipboard.writeText(link);
      this.ctx.toast("Link copied: whoever opens it can join this arena.", "info", "copy");
    } catch {
      input.focus();
      input.select();
      this.ctx.toast("The link is selected: copy it with Ctrl+C (⌘C on a Mac).", "info", "copy");
    }
  }

  // ---------------------------------------------------------------- at an arena table
  /** The data-key of the arena controls that hold the focus (kept across a table's drawing). */
  focusKey() {
    const active = document.activeElement;
    return active?.closest?.(".arena-bar, .arena-next") ? active.dataset.key ?? null : null;
  }

  /** Put the arena's bar on the table just drawn in ``screen`` (and at its game's end, the
   * Next game box in the result's panel, where the table's own "again" controls are hidden). */
  placeBar(table, screen, focus = null) {
    const id = table.info.arena;
    this.page = null;
    this.bar = { table: table.id, arena: id };
    this.need(id);
    const root = screen.querySelector(".blackdrez") ?? screen.firstElementChild;
    if (!root) return;
    for (const old of root.querySelectorAll(".arena-bar, .arena-next")) old.remove();
    const over = table.view?.phase === "over";
    const bar = this.tableBar(table, over);
    const head = root.querySelector(".table-head");
    if (head) head.after(bar);
    else root.prepend(bar);
    const result = root.querySelector(".game-over");
    if (over && result && table.seat !== null) {
      result.append(this.nextBox(table));
      const why = root.querySelector("#why");
      if (why) why.textContent = "Press Next game to be paired again in the arena.";
    }
    if (focus) root.querySelector(`[data-key="${CSS.escape(focus)}"]`)?.focus({ preventScroll: true });
  }

  /** Draw the arena table's bar again (new standings, the arena's end) on the table on screen. */
  renderBar() {
    const bar = this.bar;
    const table = bar && this.ctx.store.get(bar.table);
    const screen = document.getElementById("screen");
    if (!table?.info || !screen.querySelector(".arena-bar")) return;
    this.placeBar(table, screen, this.focusKey());
  }

  /** The bar at an arena table: the arena (a link to its page), its time, the player's rank. */
  tableBar(table, over) {
    const id = table.info.arena;
    const entry = this.known.get(id);
    const info = entry?.arena;
    const now = this.ctx.conn.serverNow();
    const mine = entry?.standings.find((s) => s.player === this.ctx.me);
    return h("section.arena-bar", { "aria-label": "Arena", dataset: { arena: id } },
      h("span.arena-bar-name", "Arena: ",
        h("a", { href: this.address(id), dataset: { key: "arena-link" } }, info?.name ?? "standings")),
      info ? timeSpan(info, now) : null,
      mine?.games ? h("span.arena-bar-rank", `You: ${ordinal(mine.rank)}, ${count(mine.points, "point")}`, mine.on_fire ? fire() : null) : null,
      table.seat !== null && !over ? this.keepBox() : null);
  }

  /** At the game's end: Next game, the way to the standings, and "Keep pairing me". */
  nextBox(table) {
    const id = table.info.arena;
    const info = this.known.get(id)?.arena;
    const link = h("a.arena-back", { href: this.address(id), dataset: { key: "arena-back" } }, "Arena standings");
    if (info && statusAt(info, this.ctx.conn.serverNow()) === "finished") {
      return h("div.arena-next", h("p", "The arena has ended: no more games."), link);
    }
    const auto = this.auto?.table === table.id;
    return h("div.arena-next", { role: "group", "aria-label": "Next arena game" },
      h("div.buttons",
        h("button#arena-next.primary", { type: "button", dataset: { key: "arena-next" }, onclick: () => this.nextGame(table.id, id) }, "Next game"),
        link),
      auto
        ? h("p.muted.arena-auto", `Your next table in ${Math.ceil((this.auto.at - Date.now()) / 1000)} s…`)
        : h("p.muted", "Next game pairs you again with the arena's free players."),
      this.keepBox());
  }

  // ---------------------------------------------------------------- the clock
  /** Twice a second: the times shown, an arena that starts or ends, the wait's clock. */
  tick() {
    const now = this.ctx.conn.serverNow();
    for (const node of document.querySelectorAll(".arena-time")) {
      const text = timeText({ starts: Number(node.dataset.starts), ends: Number(node.dataset.ends) }, now);
      node.textContent = node.dataset.capital ? capital(text) : text;
    }
    for (const pill of document.querySelectorAll(".arena-status")) {
      const status = statusAt({ starts: Number(pill.dataset.starts), ends: Number(pill.dataset.ends) }, now);
      if (pill.dataset.status !== status) {
        pill.dataset.status = status;
        pill.textContent = status;
      }
    }
    const page = this.page && this.known.get(this.page.id)?.arena;
    if (page && statusAt(page, now) !== this.page.status) this.renderPage();
    const wait = this.waiting;
    if (wait) {
      const info = this.known.get(wait.arena)?.arena;
      if (info && now >= info.ends) {
        this.stopWaiting();
        this.ctx.toast("The arena has ended: no more tables.", "info");
      } else {
        this.saveWait();
        for (const node of document.querySelectorAll(".arena-wait-clock")) node.textContent = clock(Math.max(0, now - wait.since));
      }
    }
    if (this.auto) {
      for (const node of document.querySelectorAll(".arena-auto")) {
        node.textContent = `Your next table in ${Math.max(0, Math.ceil((this.auto.at - Date.now()) / 1000))} s…`;
      }
    }
  }
}

/** One stored game of an arena: its players by place (the player's own marked), when it ended,
 * and its replay. */
function arenaGameRow(game, me) {
  const byPlace = [...game.players].sort((a, b) => (a.place ?? 99) - (b.place ?? 99) || a.seat - b.seat);
  return h("li.game-row", { dataset: { game: game.id } },
    h("a.replay-link", { href: `#/game/${game.id}`, title: "Replay this game" }, "Replay"),
    h("span.arena-game-players", byPlace.map((p, i) => [i ? ", " : " ",
      h("span", { class: p.player === me ? "mine" : "" }, p.place ? `${ordinal(p.place)} ` : "", p.name), botTag(p)])),
    h("span.muted.when", ` ${moment(game.ended_at)}`));
}

/** The standings, best first: the player's own line marked; per game points as small numbers. */
function standingsTable(lines, me) {
  if (!lines.length) return h("p.empty", "Nobody has joined yet.");
  const number = (label, short = label) => h("th.num", { scope: "col", title: label }, h("span", { "aria-hidden": "true" }, short), h("span.visually-hidden", label));
  return h("table.standings",
    h("caption.visually-hidden", "Standings, best first"),
    h("thead", h("tr",
      h("th.rank", { scope: "col" }, h("span", { "aria-hidden": "true" }, "#"), h("span.visually-hidden", "Rank")),
      h("th", { scope: "col" }, "Player"),
      number("Points", "Pts"), number("Games"), number("Wins"))),
    h("tbody", lines.map((s) => h("tr", { class: `${s.player === me ? "mine" : ""} ${s.active ? "" : "gone"}`, dataset: { player: s.player } },
      h("td.rank", String(s.rank)),
      h("td.who",
        h("span.name", s.name), botTag(s),
        s.player === me ? h("span.badge.you", "you") : null,
        s.active ? null : h("span.badge.left", { title: "Left the arena: the points stay" }, "left"),
        s.on_fire ? fire() : null,
        s.results.length
          ? h("span.arena-results",
            h("span.visually-hidden", `Points by game: ${s.results.join(", ")}`),
            s.results.map((r) => h("span.result", { "aria-hidden": "true", class: r > 0 ? "scored" : "" }, String(r))))
          : null),
      h("td.num.line-points", String(s.points)),
      h("td.num.line-games", String(s.games)),
      h("td.num.line-wins", String(s.wins))))));
}
