// The BlackDrez table: seats around the felt (a grid, so seats never overlap however many there
// are), hands and values, dealer and turn (with the turn timer), the stock, pot and carry-over,
// a summary of each round that stays up through the pause, the game-over screen, and the
// controls: an action bar (sticky at the bottom of the screen) that says whose turn it is and
// why a button is disabled, and the table's own buttons (ready, bots, start, leave).

import { h, swap } from "./dom.js";
import { pokerCard } from "./cards.js";
import { fairness } from "./fairness.js";
import { arrive, capture, celebrate, sweep } from "./motion.js";
import { ratingChangeText, ratingTag, ratingText } from "./rating.js";
import { count, describeEvent, listing, seatNames, tableName } from "./words.js";
import { chatButton, chatPanel, chatPill, chatPlaced } from "./chat.js";


const STATUS_TEXT = {
  out: "Sitting out", playing: "Playing", stood: "Stood", bust: "Bust",
  withdrawn: "Withdrew", winner: "Won the round", lost: "Lost the round",
};

// Where seats sit around the table, going clockwise from the viewer's seat at the bottom
// centre: B bottom, BL/BR bottom left/right, L left, T top, R right.
const ARRANGEMENTS = {
  2: ["B", "T"],
  3: ["B", "T", "T"],
  4: ["B", "L", "T", "R"],
  5: ["B", "L", "T", "T", "R"],
  6: ["B", "L", "T", "T", "T", "R"],
  7: ["B", "BL", "L", "T", "T", "R", "BR"],
  8: ["B", "BL", "L", "T", "T", "T", "R", "BR"],
};

/** The seats of each side of the table, in the order they are shown (left to right, top to
 * bottom), with ``mine`` at the bottom centre. */
function arrangement(n, mine) {
  const sides = { top: [], left: [], right: [], bottom: [] };
  const slots = ARRANGEMENTS[n] ?? ARRANGEMENTS[8];
  let bottomLeft = null;
  let bottomRight = null;
  slots.forEach((slot, k) => {
    const seat = (mine + k) % n;
    if (slot === "T") sides.top.push(seat);
    else if (slot === "L") sides.left.unshift(seat);
    else if (slot === "R") sides.right.push(seat);
    else if (slot === "BL") bottomLeft = seat;
    else if (slot === "BR") bottomRight = seat;
  });
  sides.bottom = [bottomLeft, mine, bottomRight].filter((s) => s !== null);
  return sides;
}

/** The events of the last round in the log: its start, what followed, and how it ended. */
function lastRound(table) {
  const log = table.log;
  for (let i = log.length - 1; i >= 0; i--) {
    const { event } = log[i];
    if (event.type === "round_started") {
      const after = log.slice(i + 1).map((n) => n.event);
      const end = after.find((e) => e.type === "round_won" || e.type === "pot_split") ?? null;
      return { started: event, after, end };
    }
    if (event.type === "game_started") return null;
  }
  return null;
}

/** The hand ``seat`` held at the end of the round: what it was dealt and what it hit. */
function finalHand(round, seat) {
  return [
    ...(round.started.hands[seat] ?? []),
    ...round.after.filter((e) => e.type === "hit" && e.seat === seat).map((e) => e.card),
  ];
}

function handValue(cards) {
  const points = { Q: 5, R: 4, B: 3, N: 2, P: 1, J: 1 };
  let low = 0;
  let jokers = 0;
  for (const card of cards) {
    low += points[card[0]];
    if (card[0] === "J") jokers += 1;
  }
  return low >= 11 ? low : low + 5 * Math.min(jokers, Math.floor((11 - low) / 5));
}

/** The round's result, kept on screen through the pause: who won, with which hand, each
 * share of a split and the carry-over. */
function roundSummary(table, names, round, pausing) {
  const end = round.end;
  const who = (seat) => names[seat];
  const hand = (seat) => {
    const cards = finalHand(round, seat);
    return h("div.summary-hand",
      h("span.summary-name", who(seat)),
      h("span.hand", cards.map((c) => pokerCard(c, { small: true }))),
      h("span.summary-value", `${handValue(cards)}`));
  };
  const headline = roundHeadline(round, names);
  let body;
  if (end.type === "round_won") {
    body = [hand(end.seat), h("p.summary-take", `${who(end.seat)} takes ${count(end.cards.length, "card")} into their pile.`)];
  } else {
    body = [
      ...end.winners.map((seat) => hand(seat)),
      h("ul.shares", end.winners.map((seat, i) => h("li", `${who(seat)} takes ${count(end.shares[i].length, "card")}`))),
      end.carry_over.length
        ? h("p.summary-carry", `${count(end.carry_over.length, "card")} could not be shared and ${end.carry_over.length === 1 ? "goes" : "go"} to the next round's winner.`)
        : null,
    ];
  }
  const pause = table.info.options?.round_pause_seconds ?? 3;
  return h("section.round-summary", { "aria-label": "Last round", dataset: { round: round.started.round } },
    h("h3.round-result", headline),
    body,
    pausing ? h("p.next-round", "Next round in a moment…", h("span.pause-bar", { style: { animationDuration: `${pause}s` } })) : null);
}

/** A round's result in one line: "Ada wins round 2 with 11", "Round 3 is shared: …". */
function roundHeadline(round, names) {
  const end = round.end;
  const n = round.started.round;
  if (end.type === "round_won") {
    return end.reason === "eleven" ? `${names[end.seat]} wins round ${n} with 11` : `${names[end.seat]} wins round ${n}: everyone else went out`;
  }
  return `Round ${n} is shared: ${end.reason === "eleven" ? "several 11s on the deal" : "everyone stood"}`;
}

function seatBox(ctx, table, index, names, compact) {
  const info = table.info;
  const view = table.view;
  const occupant = info.seats[index];
  const mine = table.seat === index;
  const host = info.host === ctx.me;
  // Where the seat plays after yours (yours: 0): the phone lists the seats in this order.
  const n = info.seats.length;
  const style = { "--play-order": String((index - (table.seat ?? 0) + n) % n) };
  if (!occupant) {
    // Kept for a player who played this rated game and left: their result stays in it.
    const kept = (info.held ?? []).find((x) => x.seat === index);
    if (kept && kept.player !== ctx.me) {
      return h("div.seat.empty.kept", { dataset: { seat: index }, style },
        h("div.seat-name", `Seat ${index + 1}`),
        h("p.muted", { title: "A player who left a rated game keeps their seat and result until the game ends" }, `Kept for ${kept.name}`),
        h("p.muted", "(left this rated game)"));
    }
    return h("div.seat.empty", { dataset: { seat: index }, style },
      h("div.seat-name", `Seat ${index + 1}`),
      h("p.muted", kept ? "Your seat in this game: sit here to play on." : "Empty"),
      table.seat === null && info.status !== "closed"
        ? h("button", { dataset: { key: `sit-${index}` }, onclick: () => sit(ctx, table, index) }, "Sit here")
        : null);
  }
  const name = names[index];
  const s = view?.seats[index];
  const playing = view && view.phase === "playing";
  const onTurn = playing && view.to_act === index;
  const dealer = view && view.round > 0 && view.phase !== "over" && view.dealer === index;
  const classes = ["seat", mine ? "mine" : "", onTurn ? "on-turn" : "", s ? `st-${s.status}` : ""].join(" ");
  const label = `${name}${mine ? " (you)" : ""}${occupant.bot ? ", a bot" : ""}${occupant.rating ? `, rating ${ratingText(occupant.rating)}` : ""}`;
  return h("div", { class: classes, dataset: { seat: index }, style, "aria-current": onTurn ? "true" : null, role: "group", "aria-label": label },
    h("div.seat-head",
      h("span.seat-name", { title: name }, name, mine ? h("span.you", " (you)") : null),
      h("span.badges",
        ratingTag(occupant.rating),
        occupant.player === info.host ? h("span.badge.host", { title: "Host of this table" }, "host") : null,
        occupant.bot ? h("span.badge.bot", { title: "A bot started by the server" }, "bot") : null,
        dealer ? h("span.badge.dealer", { title: playing ? "Dealer of this round" : "Deals the next round" }, playing ? "D" : "deals next") : null,
        info.status !== "playing" || !s?.in_round
          ? h("span.badge", { class: occupant.ready ? "ready" : "not-ready", title: occupant.ready ? "Ready to play" : "Not ready" }, occupant.ready ? "✓ ready" : "not ready")
          : null,
        h("span.dot", { class: occupant.connected ? "online" : "offline", title: occupant.connected ? "Connected" : "Disconnected", role: "img", "aria-label": occupant.connected ? "connected" : "disconnected" }),
        host && occupant.bot && info.status !== "closed"
          ? h("button.remove-bot", { dataset: { key: `remove-${index}` }, "aria-label": `Remove the bot ${name}`, title: "Remove this bot (after the round it is playing)", onclick: () => ctx.send({ type: "remove_bot", table: table.id, seat: index }) }, "remove")
          : null)),
    s && s.hand.length
      ? h("div.hand", { role: "list", "aria-label": `${name}'s hand` }, s.hand.map((c, i) => pokerCard(c, { small: compact, role: "listitem", dataset: { card: c, motion: `hand-${index}-${i}-${c}` } })))
      : null,
    h("div.seat-foot",
      s && s.value !== null ? h("div.value", { dataset: { value: s.value } }, "Value ", h("strong", String(s.value))) : null,
      s && (s.in_round || s.hand.length)
        ? h("span.seat-status", STATUS_TEXT[s.status], onTurn ? h("span.turn-mark", mine ? " · your turn" : " · to play") : null)
        : null,
      s ? h("details.pile", { dataset: { key: `pile-${index}` } },
        h("summary", { "aria-label": `${name}'s pile: ${count(s.pile.length, "card")}` }, "Pile ", h("strong.pile-count", String(s.pile.length))),
        h("div.pile-cards", s.pile.map((c) => pokerCard(c, { small: true })))) : null),
    onTurn && table.deadline ? timer(table, ctx.conn.serverNow()) : null);
}

/** The turn timer; app.js refreshes every [data-deadline] four times a second. */
function timer(table, now) {
  const total = table.info.options?.turn_seconds ?? 30;
  const left = Math.max(0, table.deadline - now);
  return h("div.timer", { dataset: { deadline: table.deadline, total }, role: "timer", "aria-label": "Time left to play" },
    h("span.seconds", `${Math.ceil(left)} s`),
    h("span.track", h("span.bar", { style: { width: `${Math.min(100, (100 * left) / total)}%` } })));
}

async function sit(ctx, table, seat) {
  const reply = await ctx.send({ type: "join", table: table.id, seat });
  if (reply) ctx.open(table.id, "seat");
}

const ratedFrom = new Map(); // table id -> this player's rating before its last game ended

/** At a rated table, this player's rating: noted while a game is played, and at its end the
 * change once the game is stored ("Your rating: 1512 → 1526 (+14)"; the server sends the new
 * rating in the table's info then). */
function ratingLine(table) {
  const info = table.info;
  if (!info.options?.rated || table.seat === null) return null;
  const now = info.seats[table.seat]?.rating;
  if (info.status !== "finished") { // (waiting, or playing: the rating the next game moves)
    if (now) ratedFrom.set(table.id, now);
    return null;
  }
  const before = ratedFrom.get(table.id);
  if (!before || !now) return null;
  if (now.games <= before.games) return h("p.rating-line.muted", "Your rating changes as soon as the game is stored…");
  return h("p.rating-line", { id: "rating-change" }, "Your rating: ", h("strong", ratingChangeText(before, now)));
}

/** The game-over screen: who won and why, the ranking, and playing again with the same table. */
function gameOver(ctx, table, names, startGame) {
  const result = table.view?.result;
  if (!result) return null;
  const first = result.ranking[0];
  const winners = first ? first.seats.map((s) => names[s]) : [];
  const ranked = new Set(result.ranking.flatMap((p) => p.seats));
  const newcomer = table.seat !== null && !ranked.has(table.seat);
  const headline = !first
    ? "The game ended before anyone played a round"
    : winners.length === 1
      ? `${winners[0]} wins with ${count(first.cards, "card")}`
      : `${listing(winners)} share the win with ${count(first.cards, "card")} each`;
  const why = result.reason === "stock"
    ? "The stock could not deal another round, so the game ended: the biggest pile wins."
    : `This table plays ${count(result.rounds, "round")}, and ${result.rounds === 1 ? "it was" : "all were"} played: the biggest pile wins.`;
  const info = table.info;
  const readyNames = info.seats.map((s, i) => (s && s.ready ? names[i] : null)).filter(Boolean);
  const host = info.host === ctx.me;
  const me = table.seat !== null ? info.seats[table.seat] : null;
  // The last round's result first (it ended the game; its own panel gives way to this one).
  const round = lastRound(table);
  const mine = table.seat !== null && (first?.seats.includes(table.seat) ?? false);
  return h("section.ranking.game-over", { "aria-labelledby": "ranking-title" },
    newcomer ? h("p.muted", "You joined after this game ended. Its result:") : null,
    mine ? h("p.win-line", winners.length === 1 ? "You won!" : "You share the win!") : null,
    round?.end ? h("p.last-round", { id: "last-round" }, `Last round: ${roundHeadline(round, names)}.`) : null,
    h("h3.headline", headline),
    h("p.why", why),
    h("h4#ranking-title", `Final ranking after ${count(result.rounds, "round")}`),
    h("ol", result.ranking.map((place) => h("li", { value: place.place, class: place.place === 1 ? "first" : "" },
      h("span.place", `${place.place}.`),
      h("span.who", place.seats.map((s) => names[s]).join(", ")),
      h("span.cards", count(place.cards, "card"))))),
    ratingLine(table),
    info.status === "finished" && table.seat !== null
      ? h("div.again",
        host
          ? h("button.primary", { id: "play-again", dataset: { key: "play-again" }, onclick: startGame }, "Play again")
          : h("button.primary", { id: "ready-again", dataset: { key: "ready-again" }, "aria-pressed": me?.ready ? "true" : "false", onclick: () => ctx.send({ type: "ready", table: table.id, ready: !me?.ready }) }, me?.ready ? "Ready ✓ (waiting for the host)" : "Ready for another game"),
        h("p.muted", readyNames.length ? `Ready for the next game: ${listing(readyNames)}.` : "Nobody is ready for the next game yet."))
      : null);
}

// The host fills empty seats with bots the server starts (they play over the same protocol).
const BOT_STRATEGIES = [["threshold", "Bot: threshold"], ["bust_probability", "Bot: bust odds"]];
let botStrategy = "threshold";

export function renderBlackDrez(ctx, table, screen, fresh = []) {
  const { info, view, legal } = table;
  const seated = table.seat !== null;
  const me = seated ? info.seats[table.seat] : null;
  const names = seatNames(info);
  const can = (type) => legal.some((a) => a.type === type);
  const host = info.host === ctx.me;
  if (info.status !== "finished") ratingLine(table); // (notes the rating the game starts from)
  const between = info.status !== "playing";
  const readyOthers = info.seats.filter((s, i) => s && s.ready && i !== table.seat).length;
  const canStart = host && between && readyOthers >= 1;
  const startGame = async () => {
    // The host who starts plays: ready first if need be.
    if (!me?.ready && !(await ctx.send({ type: "ready", table: table.id, ready: true }))) return;
    ctx.send({ type: "start", table: table.id });
  };
  const compact = info.seats.length >= 6;
  const sides = arrangement(info.seats.length, table.seat ?? 0);
  const seatOf = (i) => seatBox(ctx, table, i, names, compact);
  const round = view ? lastRound(table) : null;
  const pausing = view && view.phase === "between_rounds" && info.status === "playing";
  const summary = round && round.end && view.phase !== "playing" ? roundSummary(table, names, round, pausing) : null;
  const over = view && view.phase === "over";

  // The centre of the table: stock, pot and carry-over; or what the table waits for.
  const centre = h("div.centre",
    view
      ? [
        h("div.stock", { id: "stock-pile", title: `${count(view.stock, "card")} left in the stock` },
          h("span.card.back.stock-card", { "aria-hidden": "true" }),
          h("span.stock-text", h("span.label", "Stock "), h("strong", { id: "stock-count" }, String(view.stock)), h("span.muted", ` · ${view.decks} deck${view.decks > 1 ? "s" : ""}`))),
        h("div.pot", h("span.label", "Pot"),
          view.pot.length
            ? h("div.hand", view.pot.map((c, i) => pokerCard(c, { small: true, dataset: { card: c, motion: `pot-${i}-${c}` } })))
            : h("span.muted", "empty")),
        view.carry_over.length
          ? h("div.carry", h("span.label", `Carried over (${view.carry_over.length})`), h("div.hand", view.carry_over.map((c, i) => pokerCard(c, { small: true, dataset: { card: c, motion: `carry-${i}-${c}` } }))))
          : null,
      ]
      : h("p.waiting", waitingText(info, host, readyOthers, seated)),
    over ? gameOver(ctx, table, names, startGame) : summary);

  const felt = h("div.felt", { class: compact ? "compact" : "", dataset: { seats: info.seats.length } },
    h("div.seats.seats-top", sides.top.map(seatOf)),
    h("div.seats.seats-left", sides.left.map(seatOf)),
    centre,
    h("div.seats.seats-right", sides.right.map(seatOf)),
    h("div.seats.seats-bottom", sides.bottom.map(seatOf)));

  // The action bar: whose turn it is, the game's buttons, and why a button is disabled.
  const myTurn = legal.length > 0;
  const why = situation(table, names, can, host);
  const actionBar = h("div.controls.action-bar", { role: "group", "aria-label": "Your actions", class: myTurn ? "my-turn" : over ? "at-rest" : "" },
    seated
      ? [
        h("div.turn-banner", myTurn ? h("strong", why.banner) : why.banner),
        myTurn && table.deadline ? timer(table, ctx.conn.serverNow()) : null,
        h("div.actions",
          h("button.action.primary", { id: "hit", dataset: { key: "hit" }, disabled: !can("hit"), title: can("hit") ? "Take a card (H)" : why.hit, "aria-keyshortcuts": "H", onclick: () => ctx.act(table.id, { type: "hit" }) }, "Hit"),
          h("button.action", { id: "stand", dataset: { key: "stand" }, disabled: !can("stand"), title: can("stand") ? "Stand (S)" : why.stand, "aria-keyshortcuts": "S", onclick: () => ctx.act(table.id, { type: "stand" }) }, "Stand"),
          h("button.action", { id: "withdraw", dataset: { key: "withdraw" }, disabled: !can("withdraw"), title: can("withdraw") ? "Leave the round keeping half your cards (W)" : why.withdraw, "aria-keyshortcuts": "W", onclick: () => ctx.act(table.id, { type: "withdraw" }) }, "Withdraw")),
        h("p.why", { id: "why" }, why.line),
      ]
      : h("span.muted", "You are watching."),
    chatPill(ctx, table));

  const tableControls = h("div.table-controls", { role: "group", "aria-label": "Table" },
    seated ? [
      // Ready is for the game the host starts next, and the server clears it when a game ends:
      // offered only while the table waits for a game (at a game's end the result holds the
      // one control for the next: Play again, or Ready for another game).
      // The host's Start game starts them too: no Ready of their own to press.
      info.status === "open" && !host
        ? h("button", { id: "ready", dataset: { key: "ready" }, "aria-pressed": me?.ready ? "true" : "false", title: me?.ready ? "Press again if you are not ready after all" : "Tell the host you are ready: they start the game", onclick: () => ctx.send({ type: "ready", table: table.id, ready: !me?.ready }) }, me?.ready ? "Ready to play ✓" : "Ready to play")
        : null,
      host && info.seats.includes(null) ? [
        h("select", { id: "bot-strategy", dataset: { key: "bot-strategy" }, "aria-label": "Strategy of the bot to add", onchange: (event) => { botStrategy = event.target.value; } },
          BOT_STRATEGIES.map(([value, label]) => h("option", { value, selected: value === botStrategy }, label))),
        h("button", { id: "add-bot", dataset: { key: "add-bot" }, onclick: () => ctx.send({ type: "add_bots", table: table.id, count: 1, strategy: botStrategy }) }, "Add bot"),
      ] : null,
      host && info.status === "open" ? h("button.primary", { id: "start", dataset: { key: "start" }, disabled: !canStart, title: canStart ? "Start a game: you play too" : START_REASON, onclick: startGame }, "Start game") : null,
      host && !canStart && info.status === "open" ? h("span.why", START_REASON) : null,
    ] : null,
    h("span.spacer"),
    h("button", { dataset: { key: "help" }, onclick: () => ctx.help("blackdrez") }, "How to play"),
    h("button", { id: "leave", dataset: { key: "leave" }, onclick: () => ctx.leave(table.id) }, seated ? "Leave table" : "Stop watching"),
    h("button", { dataset: { key: "lobby" }, onclick: () => ctx.lobby() }, "Lobby"));

  const before = capture(screen);
  swap(screen, h("div.blackdrez",
    h("div.table-head",
      h("h2", tableName(info)),
      h("span.status", { dataset: { status: info.status } }, STATUS_WORDS[info.status] ?? info.status),
      info.options?.rated ? h("span.badge.rated", { title: "A rated table: each game moves its players' ratings" }, "rated") : null,
      view ? h("span", `Round ${view.round}${info.options?.max_rounds ? ` of ${info.options.max_rounds}` : ""}`) : null,
      chatButton(ctx, table),
      shareLine(ctx, table)),
    felt,
    actionBar,
    tableControls,
    h("div.below",
      // The chat (chat.js: the same panel at each drawing, so what is typed stays).
      chatPanel(ctx, table),
      h("details.log", { open: true, dataset: { key: "log" } },
        h("summary", "Table log"),
        // Turns are on the action bar, chat lines in the chat; the log keeps what happened.
        h("ol.events", table.log.filter((n) => n.event.type !== "turn" && n.event.type !== "said").reverse().map((n) => h("li", describeEvent(table, n.event, n.names))))),
      fairness(view?.commitment ?? info.commitment, view?.seed))));
  chatPlaced(table.id);

  animate(screen, before, fresh);
  // The turn comes to this player: their seat in view, above the action bar (style.css's
  // scroll-margin), should the page be scrolled elsewhere or the felt be tall (8 seats).
  if (myTurn && !wasMyTurn.get(table.id)) screen.querySelector(".seat.mine")?.scrollIntoView({ block: "nearest" });
  wasMyTurn.set(table.id, myTurn);
  const result = view?.result;
  if (result && table.seat !== null) {
    // A game this player won (alone or shared) is celebrated once; any end is brought into view.
    const won = result.ranking[0]?.seats.includes(table.seat) ?? false;
    const panel = screen.querySelector(".game-over");
    if (celebrate(panel, `${table.id}:${view.commitment}`, won)) {
      // The own seat (under the panel) in view too, where the screen holds both.
      const seat = screen.querySelector(".seat.mine")?.getBoundingClientRect();
      const below = seat ? seat.bottom + 8 - innerHeight : 0;
      if (below > 0 && panel.getBoundingClientRect().top - below >= 0) scrollBy(0, below);
    }
  }
  ctx.shortcuts = seated ? {
    h: () => can("hit") && ctx.act(table.id, { type: "hit" }),
    s: () => can("stand") && ctx.act(table.id, { type: "stand" }),
    w: () => can("withdraw") && ctx.act(table.id, { type: "withdraw" }),
  } : {};
}

const wasMyTurn = new Map(); // table id -> whether it was this player's turn at the last drawing

/** The table's link to send someone, with a Copy button: a public table's address (the link
 * opens it, to watch or take a free seat), or a private table's invite (its code, and a link
 * that seats whoever opens it: app.js joins the table it names). In full while the table waits
 * for players; once a game is on, the button alone (the felt needs the room, on a phone most). */
function shareLine(ctx, table) {
  if (table.info.status === "closed") return null;
  const code = table.invite ? `${table.id}:${table.invite}` : null;
  const link = code ? `${location.origin}${location.pathname}#/invite/${code}` : ctx.tableLink(table.id);
  const waiting = table.info.status === "open";
  const field = waiting ? h("input#invite-link", { readonly: true, value: link, "aria-label": code ? "Invite link to send" : "Link to this table", onfocus: (e) => e.target.select() }) : null;
  const button = h("button.copy", { type: "button", id: "copy-link", dataset: { link }, title: code ? "Copy the invite link: whoever opens it sits at this table" : "Copy this table's link: whoever opens it can watch, or sit in a free seat", onclick: () => copyLink(ctx, link, field) }, "Copy link");
  if (!waiting) return h("span.invite.compact", code ? ["Invite code: ", h("code", code), " "] : null, button);
  return h("span.invite", code ? ["Invite code: ", h("code", code), " "] : null,
    h("label", { for: "invite-link" }, code ? "Link:" : "Share:"), " ", field, button);
}

/** Copy ``link`` to the clipboard; where the browser refuses, select it in ``field`` (or show
 * it) for the player to copy by hand. */
async function copyLink(ctx, link, field) {
  try {
    await navigator.clipboard.writeText(link);
    ctx.toast("Link copied: send it to whoever you want at this table.", "info", "copy");
  } catch {
    if (field) {
      field.focus();
      field.select();
      ctx.toast("The link is selected: copy it with Ctrl+C (⌘C on a Mac).", "info", "copy");
    } else ctx.toast(`Copy this link by hand: ${link}`, "info", "copy");
  }
}

const STATUS_WORDS = { open: "waiting for players", playing: "playing", finished: "game over", closed: "closed" };

/** Deals and hits fly in from the stock; at a round's end the table sweeps to the winners. */
function animate(screen, before, fresh) {
  const types = new Set(fresh.map((e) => e.type));
  if (types.has("round_started") || types.has("hit")) arrive(screen, before, screen.querySelector("#stock-pile .card"));
  const end = fresh.find((e) => e.type === "round_won" || e.type === "pot_split");
  if (!end) return;
  const onTable = new Map([...before].filter(([key]) => /^(hand|pot|carry)-/.test(key)));
  const pile = (seat) => screen.querySelector(`.seat[data-seat="${seat}"] .pile summary`) ?? screen.querySelector(`.seat[data-seat="${seat}"]`);
  const targets = end.type === "round_won"
    ? [{ element: pile(end.seat), cards: onTable.size }]
    : end.winners.map((seat, i) => ({ element: pile(seat), cards: end.shares[i].length }));
  sweep(onTable, targets.filter((t) => t.element));
}

function waitingText(info, host, readyOthers, seated) {
  const free = info.seats.filter((s) => s === null).length;
  if (!seated) return "Waiting for the host to start a game.";
  if (host) {
    return readyOthers
      ? "Press Start game when everyone you want is seated: you play too."
      : `Waiting for players${free ? `: ${count(free, "seat")} free. Send someone the link (Copy link, above), or press Add bot` : ""}.`;
  }
  return "Press Ready to play, then the host starts the game.";
}

/** Why the host cannot start yet. */
const START_REASON = "Start needs one other ready player: press Add bot, or wait for someone to join and press Ready to play.";

/** The action bar's headline (what is going on) and, under the buttons, what to do now or
 * why a button is disabled; also each disabled button's reason, for its tooltip. */
function situation(table, names, can, host) {
  const view = table.view;
  const mine = view?.seats[table.seat];
  const quiet = (banner, line) => ({ banner, line, hit: line, stand: line, withdraw: line });
  if (!view) {
    return quiet("Waiting to start", host ? "Press Start game when you are ready: you play too." : "Press Ready to play; the host starts the game.");
  }
  if (view.phase === "over") {
    return quiet("Game over", host ? "Press Play again for another game with the same players." : "Press Ready for another game; the host starts it.");
  }
  if (view.phase === "between_rounds") return quiet(`Round ${view.round} is over`, "The next round starts in a moment.");
  const onTurn = names[view.to_act] ?? "Someone";
  if (!mine?.in_round || !["playing", "stood"].includes(mine.status)) {
    return quiet(`${onTurn} to play`, mine && ["bust", "withdrawn"].includes(mine.status)
      ? "You are out of this round: the next one starts when it ends."
      : "You play from the next round.");
  }
  if (view.to_act !== table.seat) return quiet(`${onTurn} to play`, "Wait for your turn.");
  const playing = view.seats.filter((s) => s.in_round && ["playing", "stood"].includes(s.status));
  const stand = `Stand only when every hand in the round is level (now ${playing.map((s) => s.value).join(", ")}).`;
  const hit = "The stock is empty: withdraw, or stand if all hands are level.";
  const line = [!can("hit") ? hit : "", !can("stand") ? stand : ""].filter(Boolean).join(" ") || "Hit, stand or withdraw (keys H, S, W).";
  return { banner: "Your turn", line, hit, stand, withdraw: "" };
}
