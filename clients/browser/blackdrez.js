// The BlackDrez table: seats around the table, hands and values, dealer and turn (with the turn
// timer), the pot and carry-over, piles, round results, the final ranking, and the controls.

import { h, swap } from "./dom.js";
import { pokerCard } from "./cards.js";
import { fairness } from "./fairness.js";

const STATUS_TEXT = {
  out: "Sitting out", playing: "Playing", stood: "Stood", bust: "Bust",
  withdrawn: "Withdrew", winner: "Won the round", lost: "Lost the round",
};

function nameOf(table, seat) {
  return table.info?.seats[seat]?.name ?? `Seat ${seat + 1}`;
}

/** One line of the table log for an event. */
export function describeEvent(table, e) {
  const who = (seat) => nameOf(table, seat);
  switch (e.type) {
    case "seat_taken": return `${e.name} sat down in seat ${e.seat + 1}`;
    case "seat_freed": return `Seat ${e.seat + 1} is free (${e.reason})`;
    case "ready_changed": return `${who(e.seat)} is ${e.ready ? "ready" : "not ready"}`;
    case "presence": return `${who(e.seat)} ${e.connected ? "is back" : "lost the connection"}`;
    case "game_started": return "A new game started";
    case "timed_out": return `${who(e.seat)} ran out of time: ${e.action?.type ?? "default action"}`;
    case "round_started": return `Round ${e.round}: ${who(e.dealer)} deals`;
    case "hit": return `${who(e.seat)} hit ${e.card} → ${e.value > 11 ? "bust" : e.value}`;
    case "bust": return `${who(e.seat)} is bust (${e.value})`;
    case "withdrew": return `${who(e.seat)} withdrew, keeping ${e.kept.length} card${e.kept.length === 1 ? "" : "s"}`;
    case "stood": return `${who(e.seat)} stood`;
    case "turn": return `${who(e.seat)} to act`;
    case "round_won": return `${who(e.seat)} won the round (${e.reason === "eleven" ? "11" : "last player"}) and took ${e.cards.length} cards`;
    case "pot_split": return `Pot split between ${e.winners.map(who).join(" and ")}${e.carry_over.length ? `; ${e.carry_over.length} carried over` : ""}`;
    case "game_over": return "The game is over";
    case "table_closed": return `The table closed: ${e.reason}`;
    default: return e.type;
  }
}

/** The headline of the last round's result, from the log (or the view after a reload). */
function roundResult(table) {
  const view = table.view;
  if (!view || view.phase === "playing") return null;
  for (let i = table.log.length - 1; i >= 0; i--) {
    const e = table.log[i];
    if (e.type === "round_started") break;
    if (e.type === "round_won" || e.type === "pot_split") return describeEvent(table, e);
  }
  const winners = view.seats.filter((s) => s.status === "winner").map((s) => nameOf(table, s.seat));
  if (!winners.length) return null;
  return winners.length === 1 ? `${winners[0]} won round ${view.round}` : `Round ${view.round} split between ${winners.join(" and ")}`;
}

function seatBox(ctx, table, index, position) {
  const info = table.info;
  const view = table.view;
  const occupant = info.seats[index];
  const mine = table.seat === index;
  const style = { "--x": `${position.x}%`, "--y": `${position.y}%`, "--ty": position.anchor };
  if (!occupant) {
    return h("div.seat.empty", { style, dataset: { seat: index } },
      h("div.seat-name", `Seat ${index + 1}`),
      h("p.muted", "Empty"),
      table.seat === null && info.status !== "closed"
        ? h("button", { dataset: { key: `sit-${index}` }, onclick: () => sit(ctx, table, index) }, "Sit here")
        : null);
  }
  const s = view?.seats[index];
  const onTurn = view && view.phase === "playing" && view.to_act === index;
  const isDealer = view && view.dealer === index && view.phase !== "over" && view.round > 0;
  const classes = ["seat", mine ? "mine" : "", onTurn ? "on-turn" : "", s ? `st-${s.status}` : ""].join(" ");
  return h("div", { class: classes, style, dataset: { seat: index }, "aria-current": onTurn ? "true" : null },
    h("div.seat-head",
      h("span.seat-name", occupant.name, mine ? h("span.you", " (you)") : null),
      h("span.badges",
        occupant.player === info.host ? h("span.badge.host", { title: "Host" }, "host") : null,
        isDealer ? h("span.badge.dealer", { title: "Dealer" }, "D") : null,
        h("span.badge", { class: occupant.ready ? "ready" : "not-ready", title: occupant.ready ? "Ready" : "Not ready" }, occupant.ready ? "✓ ready" : "not ready"),
        h("span.dot", { class: occupant.connected ? "online" : "offline", title: occupant.connected ? "Connected" : "Disconnected", "aria-label": occupant.connected ? "connected" : "disconnected" }))),
    s && s.in_round ? h("div.seat-status", STATUS_TEXT[s.status], onTurn ? h("span.turn-mark", " · on turn") : null) : null,
    s && s.hand.length
      ? h("div.hand", { "aria-label": `${occupant.name}'s hand` }, s.hand.map((c) => pokerCard(c, { small: true })))
      : null,
    s && s.value !== null ? h("div.value", { dataset: { value: s.value } }, "Value ", h("strong", String(s.value))) : null,
    onTurn && table.deadline ? timer(table, ctx.conn.serverNow()) : null,
    s ? h("details.pile", { dataset: { key: `pile-${index}` } },
      h("summary", "Pile: ", h("strong.pile-count", String(s.pile.length)), ` card${s.pile.length === 1 ? "" : "s"}`),
      h("div.pile-cards", s.pile.map((c) => pokerCard(c, { small: true })))) : null);
}

/** The turn timer; app.js refreshes every [data-deadline] four times a second. */
function timer(table, now) {
  const total = table.info.options?.turn_seconds ?? 30;
  const left = Math.max(0, table.deadline - now);
  return h("div.timer", { dataset: { deadline: table.deadline, total }, role: "timer", "aria-label": "Time left" },
    h("span.seconds", `${Math.ceil(left)} s`),
    h("span.track", h("span.bar", { style: { width: `${Math.min(100, (100 * left) / total)}%` } })));
}

async function sit(ctx, table, seat) {
  const reply = await ctx.send({ type: "join", table: table.id, seat });
  if (reply) ctx.open(table.id, "seat");
}

/** Seat positions around an ellipse, my seat (or seat 0) at the bottom. Seats near the top
 * hang from their point and seats near the bottom stand on it, so they stay on the felt as they
 * grow (an opened pile). */
function positions(count, bottom) {
  return Array.from({ length: count }, (_, i) => {
    const angle = Math.PI / 2 + ((i - bottom) * 2 * Math.PI) / count;
    const sin = Math.sin(angle);
    const anchor = sin < -0.5 ? "0%" : sin > 0.5 ? "-100%" : "-50%";
    return { x: 50 + 38 * Math.cos(angle), y: 50 + 47 * sin, anchor };
  });
}

function ranking(table) {
  const result = table.view?.result;
  if (!result) return null;
  return h("section.ranking", { "aria-labelledby": "ranking-title" },
    h("h3#ranking-title", `Final ranking after ${result.rounds} round${result.rounds === 1 ? "" : "s"}`),
    h("ol", result.ranking.map((place) => h("li", { value: place.place, class: place.place === 1 ? "first" : "" },
      h("span.place", `${place.place}.`),
      h("span.who", place.seats.map((s) => nameOf(table, s)).join(", ")),
      h("span.cards", `${place.cards} card${place.cards === 1 ? "" : "s"}`)))),
    h("p.muted", result.reason === "stock" ? "The stock ran out." : "The last round was played."));
}

// The host fills empty seats with bots the server starts (they play over the same protocol).
const BOT_STRATEGIES = [["threshold", "Bot: threshold"], ["bust_probability", "Bot: bust odds"]];
let botStrategy = "threshold";

export function renderBlackDrez(ctx, table, screen) {
  const { info, view, legal } = table;
  const seated = table.seat !== null;
  const me = seated ? info.seats[table.seat] : null;
  const can = (type) => legal.some((a) => a.type === type);
  const host = info.host === ctx.me;
  const readyCount = info.seats.filter((s) => s && s.ready).length;
  const between = info.status !== "playing";
  const places = positions(info.seats.length, table.seat ?? 0);
  const result = roundResult(table);
  const centre = h("div.centre",
    view
      ? [
        h("div.stock", h("span.label", "Stock"), h("strong", { id: "stock-count" }, String(view.stock)), h("span.muted", ` · ${view.decks} deck${view.decks > 1 ? "s" : ""}`)),
        h("div.pot", h("span.label", "Pot"),
          view.pot.length ? h("div.hand", view.pot.map((c) => pokerCard(c, { small: true }))) : h("span.muted", " empty")),
        view.carry_over.length
          ? h("div.carry", h("span.label", `Carry-over (${view.carry_over.length})`), h("div.hand", view.carry_over.map((c) => pokerCard(c, { small: true }))))
          : null,
        result ? h("p.round-result", { role: "status" }, result) : null,
        view.phase === "between_rounds" && info.status === "playing" ? h("p.muted", "Next round starting…") : null,
      ]
      : h("p.waiting", `Waiting for players: ${readyCount} ready. `, host ? "Start when at least two are ready." : "The host starts the game."),
    ranking(table));
  const controls = h("div.controls", { role: "group", "aria-label": "Your actions" },
    seated ? [
      h("button.action.primary", { id: "hit", dataset: { key: "hit" }, disabled: !can("hit"), onclick: () => ctx.act(table.id, { type: "hit" }) }, "Hit"),
      h("button.action", { id: "stand", dataset: { key: "stand" }, disabled: !can("stand"), onclick: () => ctx.act(table.id, { type: "stand" }) }, "Stand"),
      h("button.action", { id: "withdraw", dataset: { key: "withdraw" }, disabled: !can("withdraw"), onclick: () => ctx.act(table.id, { type: "withdraw" }) }, "Withdraw"),
      h("span.spacer"),
      h("button", { id: "ready", dataset: { key: "ready" }, "aria-pressed": me?.ready ? "true" : "false", onclick: () => ctx.send({ type: "ready", table: table.id, ready: !me?.ready }) }, me?.ready ? "Ready ✓" : "Ready"),
      host && info.seats.includes(null) ? [
        h("select", { id: "bot-strategy", dataset: { key: "bot-strategy" }, "aria-label": "Strategy of the bot to add", onchange: (event) => { botStrategy = event.target.value; } },
          BOT_STRATEGIES.map(([value, label]) => h("option", { value, selected: value === botStrategy }, label))),
        h("button", { id: "add-bot", dataset: { key: "add-bot" }, onclick: () => ctx.send({ type: "add_bots", table: table.id, count: 1, strategy: botStrategy }) }, "Add bot"),
      ] : null,
      host ? h("button.primary", { id: "start", dataset: { key: "start" }, disabled: !between || readyCount < 2, onclick: () => ctx.send({ type: "start", table: table.id }) }, info.status === "finished" ? "New game" : "Start game") : null,
    ] : h("span.muted", "You are watching."),
    h("button", { id: "leave", dataset: { key: "leave" }, onclick: () => ctx.leave(table.id) }, seated ? "Leave table" : "Stop watching"),
    h("button", { dataset: { key: "lobby" }, onclick: () => ctx.lobby() }, "Lobby"));
  swap(screen, h("div.blackdrez",
    h("div.table-head",
      h("h2", info.name || "BlackDrez table"),
      h("span.status", { dataset: { status: info.status } }, info.status),
      view ? h("span", `Round ${view.round}${info.options?.max_rounds ? ` of ${info.options.max_rounds}` : ""}`) : null,
      table.invite ? h("span.invite", "Invite code: ", h("code", `${table.id}:${table.invite}`)) : null),
    h("div.felt", { dataset: { seats: info.seats.length } },
      h("div.ring", info.seats.map((_, i) => seatBox(ctx, table, i, places[i]))),
      centre),
    controls,
    h("div.below",
      fairness(view?.commitment ?? info.commitment, view?.seed),
      h("details.log", { open: true, dataset: { key: "log" } },
        h("summary", "Table log"),
        h("ul.events", table.log.slice(-12).reverse().map((e) => h("li", describeEvent(table, e))))))));
}
