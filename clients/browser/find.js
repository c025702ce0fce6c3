// "Find a game": the lobby's matchmaking panel (protocol: find_game, queued, match_found,
// cancel_find).
//
// Theory of operation. The panel shows a form (seats, rated or casual, bots after some
// seconds) or, while the player searches, the search: time waited, the rating band the queue
// matches by, how many search, and Cancel. A search is data: the choices, the queue's `since`,
// the tables the player already held when it began, kept in sessionStorage and refreshed twice
// a second, so that a reload within the server's `keep_seconds` asks again and keeps the place (the
// server keeps `since` for a player who asks again). Every welcome (a reconnect, a reload) asks
// again the same way; a table in the welcome that the player did not hold before is the one the
// queue made while they were away, and is opened instead. The search asks again every REASK ms
// too, for a fresh count of who searches. `match_found` ends the search: said in a toast and to
// screen readers, then (a second later, once read out) the table is joined as the lobby's Join
// does: it gets its own address.
// An answer to `find_game` that arrives once the search has ended (matched or cancelled
// meanwhile) queued the player again: it is taken back with `cancel_find`.

import { h, swap } from "./dom.js";
import { count, listing } from "./words.js";

const SEARCH_KEY = "blackdrez.find";
const SIZES = [2, 3, 4, 5, 6, 7, 8];
const DEFAULT_BOTS_AFTER = 45;
const REASK = 15000; // ms between two find_game of one search (a fresh `waiting` count)
// (KEEP, OPEN_AFTER, clock and foundWords serve the arenas' queue too: arena.js)
export const KEEP = 15; // seconds the server keeps a place after its connection is lost (until it says)
// ms between saying a table was found and opening it: the screen reader has the news before the
// table's own ("Your turn.") takes the live region.
export const OPEN_AFTER = 1000;

export class Finder {
  constructor(ctx, lobby) {
    this.ctx = ctx;
    this.lobby = lobby;
    this.search = restore();
    this.last = this.search?.choices ?? { seats: null, rated: false, bots_after: null };
    this.queued = null; // the last `queued` answer of this search
    this.asked = 0; // when find_game was last sent (Date.now())
    this.cancelOwed = false; // cancelled while offline: said to the server on the next welcome
    this.body = null;
    this.ticker = null;
    if (this.search) this.startTicker();
  }

  /** The lobby's panel (built with the lobby, once per visit). */
  build() {
    this.body = h("div.find-body");
    this.render();
    return h("section.panel.find-panel", { "aria-labelledby": "find-title" },
      h("h2#find-title", "Find a game"),
      this.body);
  }

  /** After each welcome: ask again (the place is kept), or open the table made meanwhile. */
  welcomed(welcome) {
    if (this.cancelOwed) {
      this.cancelOwed = false;
      this.ctx.conn.request({ type: "cancel_find" }).catch(() => {});
    }
    const search = this.search;
    if (!search) return;
    if (search.player && search.player !== welcome.player) { // another identity now
      this.stop();
      return;
    }
    search.player = welcome.player;
    this.remember();
    const made = welcome.tables.find((id) => !search.known.includes(id));
    if (made) {
      this.stop();
      this.ctx.toast("Your table was found while you were away: here it is.", "info");
      this.ctx.announce("Your table was found while you were away.");
      setTimeout(() => this.lobby.join(made), OPEN_AFTER);
      return;
    }
    this.ask();
  }

  /** The player asked for a game with ``choices`` ({seats, rated, bots_after}). */
  start(choices) {
    this.last = choices;
    this.search = {
      player: this.ctx.me ?? null, choices, since: this.ctx.conn.serverNow(), keep: KEEP,
      known: [...new Set([...(this.ctx.conn.welcome?.tables ?? []), ...this.ctx.store.tables.keys()])],
      seen: Date.now(),
    };
    this.queued = null;
    this.cancelOwed = false;
    this.remember();
    this.startTicker();
    this.lobby.searchStarted(); // (the one place in the queue is this search's: no arena waits)
    this.render("find-cancel");
    this.ctx.announce("Looking for players.");
    this.ask();
  }

  async ask() {
    const search = this.search;
    if (!search || !this.ctx.conn.connected) return;
    this.asked = Date.now();
    let refusal = null;
    const reply = await this.ctx.send({ type: "find_game", ...search.choices }, (error) => { refusal = error; return error.code === "closed"; });
    if (this.search !== search) {
      // Matched or cancelled while the question was on its way: it queued the player again.
      if (reply && !this.search) this.ctx.conn.request({ type: "cancel_find" }).catch(() => {});
      return;
    }
    if (!reply) {
      if (refusal?.code !== "closed") this.stop(); // refused (its reason shown): the form again
      return; // (the connection dropped: the next welcome asks again)
    }
    this.queued = reply;
    search.since = reply.since;
    search.keep = reply.keep_seconds;
    this.remember();
    this.tick();
  }

  async cancel() {
    if (!this.search) return;
    this.stop("find-game");
    this.ctx.announce("Search cancelled.");
    if (this.ctx.conn.connected) await this.ctx.send({ type: "cancel_find" });
    else this.cancelOwed = true;
  }

  /** The queue made the player's table: say so, then open it as the lobby's Join does. */
  found(message) {
    const text = foundWords(message);
    this.stop();
    this.ctx.toast(text, "info");
    this.ctx.announce(text);
    setTimeout(() => this.lobby.join(message.table), OPEN_AFTER);
  }

  stop(focus = null) {
    this.search = null;
    this.queued = null;
    sessionStorage.removeItem(SEARCH_KEY);
    clearInterval(this.ticker);
    this.ticker = null;
    this.render(focus);
  }

  remember() {
    const search = this.search;
    if (!search) return;
    search.seen = Date.now();
    for (const id of this.ctx.store.tables.keys()) if (!search.known.includes(id)) search.known.push(id);
    sessionStorage.setItem(SEARCH_KEY, JSON.stringify(search));
  }

  startTicker() {
    clearInterval(this.ticker);
    this.ticker = setInterval(() => {
      this.remember();
      this.tick();
      if (Date.now() - this.asked > REASK) this.ask();
    }, 500);
  }

  // ---------------------------------------------------------------- drawing
  /** Draw the form or the search; ``focus``: the id of the control to focus (the one pressed
   * is gone). */
  render(focus = null) {
    if (!this.body) return;
    swap(this.body, this.search ? this.searching() : this.form());
    this.tick();
    if (focus) document.getElementById(focus)?.focus();
  }

  form() {
    const { seats, rated, bots_after: botsAfter } = this.last;
    const wait = h("input", {
      name: "bots_after", type: "number", min: "0", max: "600", step: "1", required: true,
      value: String(botsAfter ?? DEFAULT_BOTS_AFTER), disabled: botsAfter === null,
      "aria-label": "Seconds before bots fill in",
    });
    const bots = h("input", { name: "bots", type: "checkbox", checked: botsAfter !== null, onchange: (e) => { wait.disabled = !e.target.checked; } });
    const submit = (e) => {
      e.preventDefault();
      const f = e.target.elements;
      this.start({
        seats: f.seats.value === "any" ? null : Number(f.seats.value),
        rated: f.game.value === "rated",
        bots_after: f.bots.checked ? Number(f.bots_after.value) : null,
      });
    };
    return h("form#find", { onsubmit: submit },
      h("p.muted.find-intro", "Play BlackDrez with others who are looking too: the game starts once the seats are taken."),
      h("div.row",
        h("label.field.find-seats", h("span", "Seats"), h("select", { name: "seats" },
          h("option", { value: "any", selected: seats === null }, "Any"),
          SIZES.map((n) => h("option", { value: String(n), selected: seats === n }, String(n))))),
        h("fieldset.choice",
          h("legend", "Game"),
          h("label.check", h("input", { type: "radio", name: "game", value: "casual", checked: !rated }), " Casual"),
          h("label.check", { title: "Each game's result moves the players' ratings" }, h("input", { type: "radio", name: "game", value: "rated", checked: rated }), " Rated"))),
      h("div.row.bots-after",
        h("label.check", bots, " Let bots fill in after"), wait, h("span", { "aria-hidden": "true" }, "s")),
      h("button#find-game.primary", { type: "submit" }, "Find a game"));
  }

  searching() {
    this.clock = h("span.find-clock", "0:00");
    this.band = h("p.find-band", "…");
    this.waiting = h("p.find-waiting.muted", "Joining the queue…");
    const { seats, rated, bots_after: botsAfter } = this.search.choices;
    return h("div.find-status",
      h("p.find-title", h("span.find-dot", { "aria-hidden": "true" }), h("strong", "Looking for players… "), this.clock),
      h("p.find-choices.muted", [
        rated ? "Rated" : "Casual",
        seats === null ? "any size" : count(seats, "seat"),
        botsAfter === null ? "no bots" : `bots after ${botsAfter} s`,
      ].join(" · ")),
      this.band,
      this.waiting,
      h("button#find-cancel", { type: "button", onclick: () => this.cancel() }, "Cancel"));
  }

  /** Bring the search's figures up to date (every second). */
  tick() {
    const search = this.search;
    if (!search || !this.clock) return;
    const waited = Math.max(0, this.ctx.conn.serverNow() - search.since);
    this.clock.textContent = clock(waited);
    const queued = this.queued;
    if (!queued) return;
    if (!queued.rated) this.band.textContent = `Casual: everyone counts as ${queued.rating}, so any player fits`;
    else if (waited >= queued.anyone_after) this.band.textContent = `Your rating ${queued.rating}: players of any rating`;
    else this.band.textContent = `Your rating ${queued.rating}: players within ±${Math.round(queued.band + queued.widen * waited)} points`;
    this.waiting.textContent = queued.waiting > 1 ? `${count(queued.waiting, "player")} searching, you included` : "Only you are searching just now";
  }
}

/** The search kept by this tab, unless its place is lost by now (more than its keep_seconds
 * since this page last saw it). */
function restore() {
  try {
    const search = JSON.parse(sessionStorage.getItem(SEARCH_KEY) || "null");
    if (search && Date.now() - search.seen < search.keep * 1000) return search;
  } catch { /* unreadable: no search */ }
  sessionStorage.removeItem(SEARCH_KEY);
  return null;
}

export function clock(seconds) {
  const whole = Math.floor(seconds);
  return `${Math.floor(whole / 60)}:${String(whole % 60).padStart(2, "0")}`;
}

/** "Table found: you, Bob and 1 bot — waited 12 s" (``lead``: the words before the colon). */
export function foundWords(message, lead = "Table found") {
  const others = message.players.filter((_, seat) => seat !== message.seat);
  const who = ["you", ...others, ...(message.bots ? [count(message.bots, "bot")] : [])];
  return `${lead}: ${listing(who)} — waited ${Math.round(message.waited)} s`;
}
