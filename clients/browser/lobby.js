// The lobby: live table list, find a game (find.js), friends (friends.js), arenas (arena.js:
// the list, and the form that makes one), create / join / quick-join / spectate,
// invite codes, your tables, and the solitaire menu (random, numbered and daily deals) with the
// leaderboards: per game, of daily or random deals, today or all time, without help or with
// hints and undos; each entry links to its game's record (a file `blackdrez verify` checks).
// Built once per visit; only lists re-render, so what a user types into the forms survives every
// push.

import { h, short, swap } from "./dom.js";
import { GAME_NAMES, SOLITAIRES } from "./games.js";
import { Finder } from "./find.js";
import { Arenas } from "./arena.js";
import { botTag, ratingTag } from "./rating.js";
import { tableName } from "./words.js";

const STATUS_WORDS = { open: "waiting", playing: "playing", finished: "game over", closed: "closed" };

export class Lobby {
  constructor(ctx) {
    this.ctx = ctx;
    this.tables = new Map();
    this.listed = false; // a table list arrived (until then the list says it is looking)
    this.boards = {};
    this.daily = {}; // game -> the server's `daily` reply for today
    this.choice = { deal: "daily", period: "today", assisted: false };
    this.root = null;
    this.watching = false;
    this.finder = new Finder(ctx, this);
    this.arenas = new Arenas(ctx, this);
  }

  /** After each hello: the lobby subscription did not survive the old connection, and a search
   * for a game is asked for again (its place kept). */
  welcomed(welcome) {
    this.watching = false;
    if (this.root) this.watch();
    this.finder.welcomed(welcome);
    this.arenas.welcomed(welcome);
  }

  /** A search for a game began: the player's one place in the queue is its (no arena waits). */
  searchStarted() { this.arenas.stopWaiting(); }

  async watch() {
    if (this.watching || !this.ctx.conn.connected) return;
    this.watching = true;
    const reply = await this.ctx.send({ type: "watch_lobby" });
    if (reply) this.receive(reply);
    else this.watching = false;
    this.refreshLeaderboards();
  }

  mount(screen) {
    if (this.root && screen.contains(this.root)) return;
    this.root = this.build();
    delete screen.dataset.game;
    swap(screen, this.root);
    this.renderTables();
    this.renderMine();
    this.renderBoards();
    this.watch();
    this.arenas.refreshList();
  }

  unmount() {
    if (!this.root) return;
    this.root = null;
    if (this.watching && this.ctx.conn.connected) this.ctx.conn.request({ type: "unwatch_lobby" }).catch(() => {});
    this.watching = false;
  }

  receive(message) {
    if (message.type === "tables") {
      this.tables = new Map(message.tables.map((t) => [t.id, t]));
      this.listed = true;
    } else if (message.type === "lobby") {
      for (const info of message.tables) this.tables.set(info.id, info);
      for (const id of message.removed) this.tables.delete(id);
    } else if (message.type === "match_found") {
      // (one place in the queue: an arena's while the player waits in one, else the search's)
      if (this.arenas.waiting) this.arenas.found(message);
      else if (!this.finder.search && this.ctx.friends.expects(message)) this.ctx.friends.found(message);
      else this.finder.found(message);
      return;
    } else if (message.type === "arena_standings") {
      this.arenas.receive(message);
      return;
    } else if (message.type === "leaderboard") {
      this.boards[message.game] = message.entries;
      this.renderBoards();
      return;
    }
    this.renderTables();
  }

  tablesChanged() {
    this.renderMine();
    this.arenas.tablesChanged();
  }

  async refreshLeaderboards() {
    const { deal, period, assisted } = this.choice;
    for (const game of SOLITAIRES) {
      const daily = await this.ctx.send({ type: "daily", game });
      if (daily) this.daily[game] = daily;
      const day = period === "today" ? this.daily[game]?.day ?? new Date().toISOString().slice(0, 10) : null;
      const reply = await this.ctx.send({ type: "leaderboard", game, deal, day, assisted, limit: 10 });
      if (reply) this.boards[game] = reply;
    }
    this.renderBoards();
    this.renderDaily();
  }

  /** Fetch a ranked game's record and save it as a file (for `blackdrez verify`). */
  async downloadRecord(record) {
    const reply = await this.ctx.send({ type: "get_record", record });
    if (!reply) return;
    const link = h("a", { href: URL.createObjectURL(new Blob([reply.text], { type: "application/json" })), download: `${record}.json` });
    document.body.append(link);
    link.click();
    link.remove();
    this.ctx.toast(`Saved ${record}.json: check it with “blackdrez verify ${record}.json”.`, "info");
  }

  // ---------------------------------------------------------------- requests
  async join(table, options = {}) {
    const reply = await this.ctx.send({ type: "join", table, ...options });
    if (reply) this.ctx.open(reply.table.id, "seat");
  }

  async spectate(table, invite = null) {
    const reply = await this.ctx.send({ type: "spectate", table, invite });
    if (reply) this.ctx.open(reply.table.id, "watch", invite);
  }

  async create(form) {
    const f = form.elements;
    const number = (field) => (field.value === "" ? null : Number(field.value));
    const options = {
      name: f.name.value.trim(),
      seats: Number(f.seats.value),
      decks: f.decks.value === "auto" ? null : Number(f.decks.value),
      turn_seconds: Number(f.turn_seconds.value),
      max_rounds: number(f.max_rounds),
      round_pause_seconds: Number(f.round_pause_seconds.value),
      private: f.private.checked,
      rated: f.rated.checked,
    };
    // (beside the options, not in them: spectators' chat is the table's, not the game's)
    const reply = await this.ctx.send({ type: "create_table", options, spectator_chat: f.spectator_chat.checked });
    if (reply) this.ctx.open(reply.table.id, "seat");
  }

  async solitaire(game, deal, daily = false) {
    const message = { type: "start_solitaire", game, daily };
    if (deal !== null) message.deal = deal;
    // Daily deal pressed again while today's ranked game is still played (the player went
    // back to the lobby mid-game): that game is what they are after, not a refusal.
    const reply = await this.ctx.send(message, (error) => {
      const running = daily && error.code === "game_running" && this.runningDaily(game);
      if (!running) return false;
      this.ctx.open(running.id, "seat");
      this.ctx.toast("Your game of today's deal is still being played: here it is.", "info");
      return true;
    });
    if (reply) this.ctx.open(reply.table.id, "seat");
  }

  /** The player's session of ``game``'s daily deal whose game is not over, if it holds one. */
  runningDaily(game) {
    return [...this.ctx.store.tables.values()].find((t) => t.info?.game === game && t.info.daily
      && t.seat !== null && !(t.view && t.view.over));
  }

  // ---------------------------------------------------------------- building
  build() {
    const inviteField = h("input#invite", { name: "invite", placeholder: "t0123456789:AbCdEf12", autocomplete: "off", required: true });
    const invite = (watch) => async (e) => {
      e.preventDefault();
      const [table, code] = inviteField.value.trim().split(":");
      if (!table || !code) {
        this.ctx.toast("An invite code looks like t0123456789:AbCdEf12 (the table, a colon, the code).");
        return;
      }
      if (watch) this.spectate(table, code);
      else this.join(table, { invite: code });
    };
    // The list changes often; only a short count is announced (see renderTables). Its box keeps
    // room for two rows from the first paint (style.css), so that the panels below do not move
    // when the list arrives.
    this.tableList = h("div.table-list");
    this.tableCount = h("p.visually-hidden", { role: "status", "aria-live": "polite" });
    this.mine = h("div.mine");
    this.boardBox = h("div.boards");
    this.dailyLines = {};
    return h("div.lobby",
      h("section.panel.tables-panel", { "aria-labelledby": "tables-title" },
        h("div.panel-head",
          h("h2#tables-title", "Tables"),
          h("span.buttons",
            h("button", { onclick: () => this.ctx.help("blackdrez") }, "How to play"),
            h("button.primary", { id: "quick-join", title: "Sit at the first open table with a free seat (or get a new one)", onclick: () => this.quickJoin() }, "Quick join"))),
        this.tableCount,
        this.tableList),
      this.finder.build(),
      this.ctx.friends.panel(),
      this.arenas.listPanel(),
      this.arenas.createPanel(),
      h("section.panel.mine-panel", { "aria-labelledby": "mine-title" },
        h("h2#mine-title", "Your tables and games"), this.mine),
      h("section.panel.welcome-panel", { "aria-labelledby": "welcome-title" },
        h("h2#welcome-title", "New here? Your first game"),
        h("ol.steps",
          h("li", "Press ", h("strong", "Quick join"), " (or create a table)."),
          h("li", "Press ", h("strong", "Add bot"), " for each empty seat, then ", h("strong", "Start game"), ": you play too."),
          h("li", "On your turn: ", h("strong", "Hit"), " for a card, ", h("strong", "Withdraw"), " to keep half your cards. Exactly 11 wins the round; the biggest pile wins the game.")),
        h("p.muted", "The big number on a card is its points. Keys: H, S, W."),
        h("button", { type: "button", onclick: () => this.ctx.help("blackdrez") }, "Read the rules")),
      h("section.panel.create-panel", { "aria-labelledby": "create-title" },
        h("h2#create-title", "Create a table"),
        h("form#create", { onsubmit: (e) => { e.preventDefault(); this.create(e.target); } },
          field("Name", h("input", { name: "name", maxlength: "64", placeholder: "My table" })),
          h("div.row",
            field("Seats", h("input", { name: "seats", type: "number", min: "2", max: "8", value: "4", required: true })),
            field("Decks", h("select", { name: "decks" },
              h("option", { value: "auto" }, "Auto"), h("option", { value: "1" }, "1"), h("option", { value: "2" }, "2")))),
          h("div.row",
            field("Turn seconds", h("input", { name: "turn_seconds", type: "number", min: "1", max: "3600", value: "30", required: true })),
            field("Max rounds", h("input", { name: "max_rounds", type: "number", min: "1", max: "1000", placeholder: "no limit" }))),
          h("div.row",
            field("Pause between rounds (s)", h("input", { name: "round_pause_seconds", type: "number", min: "0", max: "60", step: "0.1", value: "3" })),
            h("label.check", h("input", { name: "private", type: "checkbox" }), " Private (invite only)"),
            h("label.check", { title: "Each game's result moves the players' ratings" }, h("input", { name: "rated", type: "checkbox" }), " Rated"),
            h("label.check", { title: "Whoever watches may write in the table's chat (players always may)" }, h("input", { name: "spectator_chat", type: "checkbox", checked: true }), " Spectators may chat")),
          h("button.primary", { type: "submit" }, "Create table"))),
      h("section.panel.invite-panel", { "aria-labelledby": "invite-title" },
        h("h2#invite-title", "Private table"),
        h("form", { onsubmit: invite(false) },
          field("Invite code", inviteField),
          h("div.buttons",
            h("button.primary", { type: "submit" }, "Join with code"),
            h("button", { type: "button", onclick: invite(true) }, "Watch with code")))),
      h("section.panel.solitaire-panel", { "aria-labelledby": "solitaire-title" },
        h("h2#solitaire-title", "Solitaire"),
        ...SOLITAIRES.map((game) => this.solitaireMenu(game)),
        this.boardControls(),
        this.boardBox),
    );
  }

  solitaireMenu(game) {
    const deal = h("input", { type: "number", min: "0", max: "2147483647", placeholder: "deal #", "aria-label": `${GAME_NAMES[game]} deal number`, name: "deal", title: "A numbered deal anyone can replay: not ranked" });
    this.dailyLines[game] = h("p.daily-line.muted", { dataset: { daily: game } });
    return h("form.solitaire", { dataset: { game }, onsubmit: (e) => { e.preventDefault(); this.solitaire(game, deal.value === "" ? null : Number(deal.value)); } },
      h("div.panel-head", h("h3", GAME_NAMES[game]),
        h("button.link", { type: "button", onclick: () => this.ctx.help(game) }, "How to play")),
      h("div.buttons",
        h("button.primary", { type: "button", dataset: { start: game }, title: "A new random deal: ranked", onclick: () => this.solitaire(game, null) }, "Random deal"),
        h("button.primary", { type: "button", dataset: { startDaily: game }, title: "Today's deal, the same for everyone (UTC day): ranked on your first try", onclick: () => this.solitaire(game, null, true) }, "Daily deal"),
        deal,
        h("button", { type: "submit" }, "Play deal")),
      this.dailyLines[game]);
  }

  /** Which boards to show: kind of deal, today or all time, with or without help. */
  boardControls() {
    const pick = (key) => (e) => {
      this.choice[key] = key === "assisted" ? e.target.checked : e.target.value;
      this.refreshLeaderboards();
    };
    return h("form.board-controls", { onsubmit: (e) => e.preventDefault() },
      h("label.field", h("span", "Leaderboard"), h("select", { name: "deal", onchange: pick("deal") },
        h("option", { value: "daily" }, "Daily deals"), h("option", { value: "random" }, "Random deals"))),
      h("label.field", h("span", "When"), h("select", { name: "period", onchange: pick("period") },
        h("option", { value: "today" }, "Today (UTC)"), h("option", { value: "all" }, "All time"))),
      h("label.check", h("input", { name: "assisted", type: "checkbox", onchange: pick("assisted") }), " Games with hints or undos"));
  }

  renderDaily() {
    if (!this.root) return;  // not drawn yet (a records page was opened first, by its link)
    for (const [game, line] of Object.entries(this.dailyLines)) {
      const daily = this.daily[game];
      if (!daily) continue;
      line.textContent = `Daily deal of ${daily.day}: same cards for everyone, commitment ${short(daily.commitment, 12)}; its seed is revealed when the day ends.`;
      line.title = daily.commitment;
    }
  }

  async quickJoin() {
    const reply = await this.ctx.send({ type: "quick_join" });
    if (!reply) return;
    const others = reply.table.seats.filter((s) => s && s.player !== this.ctx.me);
    if (!others.length && reply.table.host === this.ctx.me) {
      this.ctx.toast("No open table had a free seat, so a new table was made for you: add bots, or wait for players to join.", "info");
    }
    this.ctx.open(reply.table.id, "seat");
  }

  // ---------------------------------------------------------------- lists
  renderTables() {
    if (!this.root) return;
    if (!this.listed) {
      swap(this.tableList, h("p.empty", "Looking for tables…"));
      return;
    }
    const me = this.ctx.me;
    const rows = [...this.tables.values()].filter((t) => t.status !== "closed");
    const announce = rows.length ? `${rows.length} table${rows.length === 1 ? "" : "s"} in the lobby` : "No tables in the lobby";
    clearTimeout(this.countTimer); // announce the count once things settle, not at every push
    this.countTimer = setTimeout(() => { if (this.tableCount.textContent !== announce) this.tableCount.textContent = announce; }, 1500);
    if (!rows.length) {
      swap(this.tableList, h("p.empty", "No public tables yet: create one, or press Quick join to get a table to yourself."));
      return;
    }
    swap(this.tableList, h("ul.tables", rows.map((t) => {
      const taken = t.seats.filter(Boolean);
      const seated = taken.some((s) => s.player === me);
      // A seat kept for a rated game's leaver is not free for anyone else (info.held).
      const kept = (t.held ?? []).filter((x) => x.player !== me).length;
      const full = taken.length + kept >= t.seats.length;
      // Why Join is not offered, said beside it (a finished table's players may start another).
      const closedTo = full ? (t.status === "finished" ? "Game over, every seat taken: watch, or wait for the next game" : "Every seat is taken: watch instead") : null;
      return h("li.table-row", { dataset: { table: t.id } },
        h("div.table-name", h("strong", tableName(t)), h("span.status", { dataset: { status: t.status } }, STATUS_WORDS[t.status] ?? t.status),
          t.options?.rated ? h("span.badge.rated", { title: "A rated table: each game moves its players' ratings" }, "rated") : null),
        h("div.table-meta",
          `${taken.length}/${t.seats.length} seated`,
          kept ? ` · ${kept} kept for ${kept === 1 ? "a player" : "players"} who left` : "",
          t.round ? ` · round ${t.round}` : "",
          t.spectators ? ` · ${t.spectators} watching` : ""),
        h("div.table-players", taken.length
          ? taken.map((s, i) => h("span.player", { dataset: { player: s.player } }, i ? ", " : null, s.name, botTag(s), ratingTag(s.rating)))
          : "—"),
        h("div.buttons",
          seated
            ? h("button.primary", { dataset: { key: `open-${t.id}` }, onclick: () => this.join(t.id) }, "Open")
            : h("button.primary", { disabled: full, title: closedTo, "aria-describedby": closedTo ? `why-${t.id}` : null, dataset: { key: `join-${t.id}` }, onclick: () => this.join(t.id) }, "Join"),
          h("button", { dataset: { key: `watch-${t.id}` }, onclick: () => this.spectate(t.id), disabled: seated }, "Watch"),
          closedTo && !seated ? h("span.why", { id: `why-${t.id}` }, full && t.status === "finished" ? "Game over" : "Full") : null));
    })));
  }

  renderMine() {
    if (!this.root) return;
    const held = [...this.ctx.store.tables.values()].filter((t) => t.info);
    if (!held.length) {
      const me = this.ctx.me;
      swap(this.mine, h("p.empty", "None now: the tables you sit at and your solitaires in play show here. ",
        me ? h("a", { href: `#/player/${encodeURIComponent(me)}` }, "Your finished games") : null));
      return;
    }
    swap(this.mine, h("ul.mine-list", held.map((t) => h("li",
      h("span", `${GAME_NAMES[t.info.game]}${t.info.name ? ` “${t.info.name}”` : ""} — ${STATUS_WORDS[t.info.status] ?? t.info.status}`,
        t.view && t.view.score !== undefined ? ` · score ${t.view.score}` : ""),
      h("div.buttons",
        h("button.primary", { dataset: { key: `mine-open-${t.id}` }, onclick: () => this.ctx.open(t.id, t.seat === null ? "watch" : "seat") }, "Open"),
        t.info.game !== "blackdrez" && !(t.view && t.view.over) ? null
          : h("button", { dataset: { key: `mine-leave-${t.id}` }, onclick: () => this.ctx.leave(t.id) }, "Leave"))))));
  }

  renderBoards() {
    if (!this.root) return;
    swap(this.boardBox, SOLITAIRES.map((game) => {
      const board = this.boards[game];
      const entries = board?.entries || [];
      const what = `${board?.deal === "random" ? "random deals" : "daily deals"}, ${board?.day ? board.day : "all time"}${board?.assisted ? ", with hints or undos" : ""}`;
      return h("div.board", { dataset: { board: game } },
        h("h3", `${GAME_NAMES[game]} leaderboard`, h("span.muted.board-what", ` · ${what}`)),
        entries.length
          ? h("ol.leaderboard", entries.map((e) => h("li", { value: e.rank },
            h("span.who", e.name, e.won ? h("span.won", { title: "won" }, " ✓") : null),
            h("span.entry-meta.muted", `${e.deal === "daily" ? "daily" : "random"} · ${e.day}${e.hints || e.undos ? ` · ${helpWords(e)}` : ""}`),
            h("span.score", String(e.score)),
            recordButton(e, this))))
          : h("p.empty", "No scores yet."));
    }));
  }
}

/** A leaderboard entry's record to download; a daily deal's record is sealed until its UTC day
 * ends (its seed would give the deal away): then the button says so, and when it opens. */
function recordButton(entry, lobby) {
  const opens = entry.deal === "daily" ? Date.parse(`${entry.day}T00:00:00Z`) + 86_400_000 : 0;
  if (opens > Date.now()) {
    const at = new Date(opens).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    return h("button.link.record", { type: "button", disabled: true, dataset: { record: entry.record, sealed: "true" }, title: `Sealed until the day ends (UTC), at ${at} your time: the record shows the deal's seed` }, `sealed until ${at}`);
  }
  return h("button.link.record", { type: "button", dataset: { record: entry.record }, title: "Download this game's record: blackdrez verify checks it", onclick: () => lobby.downloadRecord(entry.record) }, "record");
}

function helpWords(entry) {
  return [entry.hints ? `${entry.hints} hint${entry.hints === 1 ? "" : "s"}` : null, entry.undos ? `${entry.undos} undo${entry.undos === 1 ? "" : "s"}` : null].filter(Boolean).join(", ");
}

function field(label, input) {
  return h("label.field", h("span", label), input);
}
