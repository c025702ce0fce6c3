// Blackjack Piles. One gesture, one meaning:
// - clicking a card (a pile's top card, or the stock's card in rounds that allow it) selects it
//   for a hand; a selection that makes a legal hand of exactly 21 (2 to 6 cards) is cashed at once;
// - placing the stock's card is its own gesture: click an empty pile, a pile's "Place here"
//   button, or drag the stock's card onto a pile;
// - a selected pile top followed by a click on an empty pile moves it there when that is legal
//   (the empty piles then say "move here"); otherwise the click places the stock's card.
// Keys: 1-5 select a pile's top, S the stock's card, Shift+1-5 place on a pile, E end the
// round, H hint (its cards are highlighted), U undo (moves since the last stock card), Esc clear
// the selection.
// By keyboard, as Blue Jacket: the stock's card is one Tab stop and the piles another (the place
// last focused: a pile's top card, empty slot or Place button); the arrow keys move between the
// stock and the piles as they lie on screen, and Enter or Space does what a click does there.

import { assistButtons, assistKey, hintOf, hintSpots, rankingLine } from "./assist.js";
import { ask } from "./ask.js";
import { arrowFocus, h, swap } from "./dom.js";
import { standardCard } from "./cards.js";
import { fairness } from "./fairness.js";
import { celebrate } from "./motion.js";
import { parLine, parOf } from "./par.js";
import { count, standardName } from "./words.js";

const selections = new Map(); // table id -> { seq, items: Set<"stock" | number> }
const roving = new Map(); // table id -> the data-key of the pile place Tab stops at (last focused)
const PLACES = "#stock, .piles-row button"; // what the arrow keys move between

export function resetPiles(id) { selections.delete(id); roving.delete(id); }

/** Among ``nodes`` (the piles' buttons), the one for ``key``: itself, else for a Place button gone
 * (a pile now full) its pile, for a pile gone (fewer piles this round) the last, else the first. */
function placeFor(nodes, key) {
  const at = (k) => nodes.find((n) => n.dataset.key === k);
  const [, kind, index] = /^(place|pile)-(\d+)$/.exec(key ?? "") ?? [];
  return at(key) ?? (kind === "place" ? at(`pile-${index}`) : null)
    ?? (kind ? nodes.findLast((n) => n.dataset.key?.startsWith("pile-")) : null) ?? nodes[0] ?? null;
}

function selectionOf(table) {
  let selection = selections.get(table.id);
  if (!selection || selection.seq !== table.seq) {
    selection = { seq: table.seq, items: new Set() };
    selections.set(table.id, selection);
  }
  return selection.items;
}

const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

function findCash(legal, items) {
  const piles = [...items].filter((x) => x !== "stock").sort((a, b) => a - b);
  const stock = items.has("stock");
  return legal.find((a) => a.type === "cash" && a.stock === stock && same(a.piles, piles));
}

/** Piles and stock that can join the current selection in some legal hand. */
function partners(legal, items) {
  const found = new Set();
  if (!items.size) return found;
  for (const a of legal) {
    if (a.type !== "cash") continue;
    const members = new Set([...a.piles, ...(a.stock ? ["stock"] : [])]);
    if ([...items].every((x) => members.has(x))) for (const m of members) if (!items.has(m)) found.add(m);
  }
  return found;
}

export function renderPiles(ctx, table, screen) {
  const { view, legal } = table;
  if (!view) {
    swap(screen, h("p.loading", "Dealing…"));
    return;
  }
  const items = selectionOf(table);
  const redraw = () => renderPiles(ctx, table, screen);
  const hinted = hintSpots(hintOf(table));
  const describe = (action) => describeAction(view, action);
  const marks = (spot) => `${hinted.from.has(spot) ? "hinted-from" : ""} ${hinted.to.has(spot) ? "hinted-to" : ""}`;
  const play = (action) => {
    items.clear();
    ctx.act(table.id, action);
    redraw();
  };
  const placeable = new Set(legal.filter((a) => a.type === "place").map((a) => a.pile));
  const onlyPile = items.size === 1 && !items.has("stock") ? [...items][0] : null;
  const movable = new Set(legal.filter((a) => a.type === "move" && a.source === onlyPile).map((a) => a.target));
  const hints = partners(legal, items);
  const stockTop = view.stock_top;
  const place = (index) => {
    if (placeable.has(index)) play({ type: "place", pile: index });
    else ctx.toast(stockTop ? `Pile ${index + 1} cannot take the stock's card: it is full.` : "The stock is empty: there is no card to place.", "info");
  };

  const toggle = (item) => {
    if (item === "stock" && !view.rules.stock_in_hand) {
      ctx.toast("In this round the stock's card cannot join a hand: place it on a pile (Place here, or an empty pile).", "info");
      return;
    }
    if (items.has(item)) items.delete(item);
    else items.add(item);
    if (items.size >= 2) {
      const cash = findCash(legal, items);
      if (cash) {
        play(cash);
        return;
      }
    }
    redraw();
  };
  const clickEmpty = (index) => {
    // The selected pile top moves there if it may; otherwise the click places the stock's card
    // (a pile's only card never moves to an empty pile: that would change nothing).
    if (movable.has(index)) play({ type: "move", source: onlyPile, target: index });
    else place(index);
  };

  const cap = view.rules.cap;
  const over = view.over;
  const piles = view.piles.map((pile, index) => {
    const full = cap !== null && pile.length >= cap;
    const moveHere = movable.has(index);
    const target = moveHere || (!pile.length && placeable.has(index));
    const label = `Pile ${index + 1}`;
    const canPlace = !over && pile.length > 0 && placeable.has(index) && stockTop;
    return h("div.pile-column", {
      class: `${target ? "target" : ""} ${full ? "full" : ""} ${marks(index)}`,
      dataset: { pile: index },
      ondragover: (e) => { if (placeable.has(index)) e.preventDefault(); },
      ondrop: (e) => { e.preventDefault(); if (e.dataTransfer.getData("text/plain") === "stock") place(index); },
    },
    h("div.pile-label", label, cap !== null ? h("span.muted", ` ${pile.length}/${cap}`) : null),
    // Placing has its own button, above the pile (one place for it, whatever the pile holds).
    canPlace
      ? h("button.place-here", { dataset: { key: `place-${index}` }, "aria-label": `Place the ${standardName(stockTop)} on ${label.toLowerCase()}`, title: `Put the stock's card on ${label.toLowerCase()} (Shift+${index + 1})`, onclick: () => place(index) }, "⤓ Place", h("span.wide-only", " here"))
      : h("span.place-spacer"),
    pile.length
      ? h("div.stack", pile.map((card, i) => (i === pile.length - 1 && !over
        ? standardCard(card, {
          tag: "button",
          class: `${items.has(index) ? "selected" : ""} ${hints.has(index) ? "hint" : ""}`,
          "aria-pressed": items.has(index) ? "true" : "false",
          "aria-label": `${label}, top card ${standardName(card)}${items.has(index) ? ", selected for a hand" : ""}`,
          title: `${standardName(card)}: click to select it for a hand of 21 (key ${index + 1})`,
          dataset: { key: `pile-${index}`, card },
          onclick: () => toggle(index),
        })
        : standardCard(card))))
      : over
        ? h("span.slot", "empty")
        : h("button.slot", { dataset: { key: `pile-${index}` }, "aria-label": `${label}, empty${moveHere ? ": move the selected card here" : stockTop ? `: place the ${standardName(stockTop)} here` : ""}`, onclick: () => clickEmpty(index) }, moveHere ? "move here" : "place here"));
  });

  // One Tab stop for the piles: the place last focused (arrows move the focus, see below).
  const pilesRow = h("div.piles-row", { onfocusin: (e) => { if (e.target.dataset.key) roving.set(table.id, e.target.dataset.key); } }, piles);
  const stops = [...pilesRow.querySelectorAll("button")];
  const stop = placeFor(stops, roving.get(table.id) ?? "pile-0");
  for (const node of stops) node.tabIndex = node === stop ? 0 : -1;

  const stock = h("div.stock-area",
    h("div.pile-label", "Stock ", h("strong", { id: "stock-count" }, String(view.stock_count))),
    stockTop && !over
      ? standardCard(stockTop, {
        tag: "button", id: "stock",
        class: `${items.has("stock") ? "selected" : ""} ${hints.has("stock") ? "hint" : ""} ${marks("stock")}`,
        "aria-pressed": items.has("stock") ? "true" : "false",
        "aria-label": `Stock's card, ${standardName(stockTop)}${items.has("stock") ? ", selected for a hand" : ""}`,
        title: view.rules.stock_in_hand ? "Click to use it in a hand (S); drag it onto a pile to place it" : "Drag it onto a pile, or use a pile's Place here button",
        draggable: "true",
        dataset: { key: "stock", card: stockTop },
        ondragstart: (e) => { e.dataTransfer.setData("text/plain", "stock"); e.dataTransfer.effectAllowed = "move"; },
        onclick: () => toggle("stock"),
      })
      : stockTop ? standardCard(stockTop) : h("span.slot.empty-stock", "empty"),
    over ? null : h("p.rule", view.rules.stock_in_hand ? "This round the stock's card may join a hand." : "This round the stock's card may not join a hand."));

  const can = (type) => legal.some((a) => a.type === type);
  const last = view.results[view.results.length - 1];
  const active = document.activeElement;
  const was = active && active !== screen && screen.contains(active) ? active.dataset.key : undefined;
  swap(screen, h("div.solitaire.piles", { class: over ? "over" : "" },
    h("div.table-head",
      h("h2", "Blackjack Piles"),
      h("dl.stats",
        stat("Round", `${view.round} / 7`, "round"), stat("Hands", view.hands, "hands"),
        stat("Left (piles + stock)", view.left, "left", "Cards still on the piles and in the stock: reach the next round with more hands than this when the round ends"),
        stat("Score", view.score, "score"))),
    rankingLine(table),
    over ? finalPanel(ctx, table) : h("p.hint-text",
      "Select cards that make 21 (2 to 6 of them): the hand is taken at once. ",
      "Put the stock's card on a pile with ", h("em", "Place here"), ", a click on an empty pile, or by dragging it."),
    last && !over && last.round === view.round - 1 ? h("p.round-result", { role: "status" }, `Round ${last.round} passed: ${count(last.hands, "hand")}, ${last.left} left, +${last.score} points. Round ${view.round}: ${roundRules(view.rules)}`) : null,
    h("div.board", stock, pilesRow),
    h("div.controls",
      can("end_round") ? h("button.primary", { id: "end-round", class: hintOf(table)?.type === "end_round" ? "hinted-to" : "", dataset: { key: "end-round" }, onclick: () => play({ type: "end_round" }) }, "End round") : null,
      ...(over ? [] : assistButtons(ctx, table, describe, redraw)),
      items.size ? h("button", { dataset: { key: "clear" }, onclick: () => { items.clear(); redraw(); } }, "Clear selection") : null,
      !over ? h("button", { id: "resign", dataset: { key: "resign" }, onclick: async () => { if (await ask({ title: "Resign this game?", text: "The round you are in scores as it stands.", yes: "Resign", no: "Play on", danger: true })) play({ type: "resign" }); } }, "Resign") : null,
      h("span.spacer"),
      h("button", { dataset: { key: "help" }, onclick: () => ctx.help("blackjack_piles") }, "How to play"),
      over ? h("button.primary", { dataset: { key: "again" }, onclick: () => playAgain(ctx, table, "blackjack_piles") }, "Play again") : null,
      over
        ? h("button", { dataset: { key: "leave" }, onclick: () => ctx.leave(table.id) }, "Back to lobby")
        : h("button", { dataset: { key: "lobby" }, onclick: () => ctx.lobby() }, "Lobby")),
    view.results.length ? resultsTable(view.results, over ? parOf(table) : null) : null,
    fairness(view.commitment, view.seed)));
  // All seven rounds passed is a win: celebrated once; any end is brought into view.
  if (over) celebrate(screen.querySelector(".final"), `${table.id}:${view.seed}`, last?.round === 7 && last.passed);
  // A place focused before the redraw and gone now (a pile's Place button once it is full, the
  // stock's card once the stock is empty): the focus goes to the pile's place nearest to it.
  if (was && !screen.contains(document.activeElement) && /^(stock|pile-|place-)/.test(was)) {
    (was === "stock" ? stop : placeFor(stops, was))?.focus({ preventScroll: true });
  }

  ctx.shortcuts = over ? {} : {
    key: (event) => {
      const digit = /^Digit([1-9])$/.exec(event.code);
      if (digit) {
        const index = Number(digit[1]) - 1;
        if (index >= view.piles.length) return false;
        if (event.shiftKey || !view.piles[index].length) place(index);
        else toggle(index);
        return true;
      }
      if (event.key === "s" && stockTop) toggle("stock");
      else if (event.key === "e" && can("end_round")) play({ type: "end_round" });
      else if (event.key === "Escape" && items.size) { items.clear(); redraw(); }
      else if (arrowFocus(event, screen, PLACES)) return true;
      else return assistKey(ctx, table, describe, redraw, event);
      return true;
    },
  };
}

/** The rounds played, with each round's par once the game is over and the server sent it. */
function resultsTable(results, par) {
  const pars = new Map((par?.rounds ?? []).map((r) => [r.round, `${r.par}${r.exact ? "" : "+"}`]));
  const heads = ["Round", "Hands", "Left", "Bonus", "Score", ...(par ? ["Par"] : []), ""];
  return h("table.results",
    h("caption", "Rounds"),
    h("thead", h("tr", heads.map((t) => h("th", t)))),
    h("tbody", results.map((r) => h("tr",
      [r.round, r.hands, r.left, r.bonus, r.score, ...(par ? [pars.get(r.round) ?? "–"] : []), r.passed ? "passed" : "ended"]
        .map((v) => h("td", String(v)))))));
}

/** A hinted action in words. */
function describeAction(view, action) {
  switch (action?.type) {
    case "place": return `place the ${standardName(view.stock_top)} on pile ${action.pile + 1}.`;
    case "cash": {
      const cards = [...action.piles.map((i) => view.piles[i].at(-1)), ...(action.stock ? [view.stock_top] : [])];
      return `cash ${cards.map(standardName).join(", ")} (21).`;
    }
    case "move": return `move the top card of pile ${action.source + 1} to the empty pile ${action.target + 1}.`;
    case "end_round": return "end the round.";
    case "resign": return "no move helps any more: resign.";
    default: return "no move is left.";
  }
}

function roundRules(rules) {
  const cap = rules.cap === null ? "no cap on a pile" : `at most ${rules.cap} cards a pile`;
  return `${rules.piles} piles, ${cap}; the stock's card ${rules.stock_in_hand ? "may" : "may not"} join a hand.`;
}

/** Why the game ended and the final score. */
function finalPanel(ctx, table) {
  const view = table.view;
  const last = view.results[view.results.length - 1];
  const ended = table.log.findLast((n) => n.event.type === "round_ended")?.event;
  let why = "";
  if (ended?.ended_by === "resign" && last) why = `You resigned in round ${last.round}.`;
  else if (last && last.round === 7 && last.passed) why = "All seven rounds passed!";
  else if (last && !last.passed) why = `Round ${last.round} was not passed: ${count(last.hands, "hand")} against ${count(last.left, "card")} left.`;
  const won = last && last.round === 7 && last.passed;
  return h("div.final", { role: "status" },
    won ? h("p.win-line", "You won!") : null,
    h("p.final-score", won ? "Final score " : "Game over — final score ", h("strong", { id: "final-score" }, String(view.score))),
    why ? h("p.why", why) : null,
    parLine(table, "seeing every card, in the rounds you played"));
}

function stat(label, value, id, title = null) {
  return h("div.stat", { title }, h("dt", label), h("dd", { id: `stat-${id}` }, String(value)));
}

/** Leave a finished session and start a new random deal of the same game. */
export async function playAgain(ctx, table, game) {
  await ctx.leave(table.id);
  const reply = await ctx.send({ type: "start_solitaire", game });
  if (reply) ctx.open(reply.table.id, "seat");
  else ctx.lobby();
}
