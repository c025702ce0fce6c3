// Blackjack Piles: click cards to select them (grey overlay); a selection that makes a legal hand
// of exactly 21 (2 to 6 cards) is cashed at once. An empty pile takes the stock's top card (or a
// selected pile top: a move); with the stock selected, clicking a pile puts the card there.

import { h, swap } from "./dom.js";
import { standardCard } from "./cards.js";
import { fairness } from "./fairness.js";

const selections = new Map(); // table id -> { seq, items: Set<"stock" | number> }

export function resetPiles(id) { selections.delete(id); }

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
  const play = (action) => {
    items.clear();
    ctx.act(table.id, action);
    redraw();
  };
  const placeable = new Set(legal.filter((a) => a.type === "place").map((a) => a.pile));
  const onlyPile = items.size === 1 && !items.has("stock") ? [...items][0] : null;
  const movable = new Set(legal.filter((a) => a.type === "move" && a.source === onlyPile).map((a) => a.target));
  const stockSelected = items.size === 1 && items.has("stock");
  const hints = partners(legal, items);

  const toggle = (item) => {
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
  const clickPile = (index) => {
    const pile = view.piles[index];
    if (!pile.length) {
      if (onlyPile !== null && movable.has(index)) play({ type: "move", source: onlyPile, target: index });
      else if (placeable.has(index) && (items.size === 0 || stockSelected)) play({ type: "place", pile: index });
      else ctx.toast("That pile cannot take a card now");
      return;
    }
    if (stockSelected) {
      const cash = findCash(legal, new Set(["stock", index]));
      if (cash) play(cash);
      else if (placeable.has(index)) play({ type: "place", pile: index });
      else ctx.toast(`Pile ${index + 1} is full`);
      return;
    }
    toggle(index);
  };

  const cap = view.rules.cap;
  const piles = view.piles.map((pile, index) => {
    const full = cap !== null && pile.length >= cap;
    const target = (stockSelected && placeable.has(index)) || movable.has(index) || (!pile.length && placeable.has(index) && items.size === 0);
    const label = `Pile ${index + 1}`;
    const column = h("div.pile-column", { class: `${target ? "target" : ""} ${full ? "full" : ""}`, dataset: { pile: index } },
      h("div.pile-label", label, cap !== null ? h("span.muted", ` ${pile.length}/${cap}`) : null),
      pile.length
        ? h("div.stack", pile.map((card, i) => (i === pile.length - 1
          ? standardCard(card, {
            tag: "button",
            class: `${items.has(index) ? "selected" : ""} ${hints.has(index) ? "hint" : ""} ${target ? "target" : ""}`,
            "aria-pressed": items.has(index) ? "true" : "false",
            "aria-label": `${label}, top card ${card}${items.has(index) ? ", selected" : ""}`,
            dataset: { key: `pile-${index}`, card },
            disabled: view.over,
            onclick: () => clickPile(index),
          })
          : standardCard(card))))
        : h("button.slot", { dataset: { key: `pile-${index}` }, disabled: view.over, "aria-label": `${label}, empty`, onclick: () => clickPile(index) }, "empty"));
    return column;
  });

  const stockTop = view.stock_top;
  const stock = h("div.stock-area",
    h("div.pile-label", "Stock ", h("strong", { id: "stock-count" }, String(view.stock_count))),
    stockTop
      ? standardCard(stockTop, {
        tag: "button", id: "stock",
        class: `${items.has("stock") ? "selected" : ""} ${hints.has("stock") ? "hint" : ""}`,
        "aria-pressed": items.has("stock") ? "true" : "false",
        "aria-label": `Stock top ${stockTop}${items.has("stock") ? ", selected" : ""}`,
        dataset: { key: "stock", card: stockTop },
        disabled: view.over,
        onclick: () => toggle("stock"),
      })
      : h("span.slot.empty-stock", "empty"),
    h("p.muted.rule", view.rules.stock_in_hand ? "The stock's top may join a hand." : "The stock's top may not join a hand."));

  const can = (type) => legal.some((a) => a.type === type);
  const last = view.results[view.results.length - 1];
  swap(screen, h("div.solitaire.piles",
    h("div.table-head",
      h("h2", "Blackjack Piles"),
      h("dl.stats",
        stat("Round", `${view.round} / 7`, "round"), stat("Hands", view.hands, "hands"),
        stat("Cards left", view.left, "left"), stat("Score", view.score, "score"))),
    h("p.hint-text", view.over ? null : "Click cards to make 21 with 2 to 6 of them. Click an empty pile to put the stock's card there, or select the stock and then a pile."),
    h("div.board", stock, h("div.piles-row", piles)),
    h("div.controls",
      can("end_round") ? h("button.primary", { id: "end-round", dataset: { key: "end-round" }, onclick: () => play({ type: "end_round" }) }, "End round") : null,
      items.size ? h("button", { dataset: { key: "clear" }, onclick: () => { items.clear(); redraw(); } }, "Clear selection") : null,
      !view.over ? h("button", { id: "resign", dataset: { key: "resign" }, onclick: () => { if (confirm("Resign this game?")) play({ type: "resign" }); } }, "Resign") : null,
      h("span.spacer"),
      view.over ? h("button.primary", { dataset: { key: "again" }, onclick: () => playAgain(ctx, table, "blackjack_piles") }, "Play again") : null,
      view.over
        ? h("button", { dataset: { key: "leave" }, onclick: () => ctx.leave(table.id) }, "Back to lobby")
        : h("button", { dataset: { key: "lobby" }, onclick: () => ctx.lobby() }, "Lobby")),
    view.over ? h("p.final", { role: "status" }, `Game over — final score `, h("strong", { id: "final-score" }, String(view.score))) : null,
    last && !view.over && last.round === view.round - 1 ? h("p.round-result", `Round ${last.round} passed: ${last.hands} hands, ${last.left} left, +${last.score}`) : null,
    view.results.length ? h("table.results",
      h("caption", "Rounds"),
      h("thead", h("tr", ["Round", "Hands", "Left", "Bonus", "Score", ""].map((t) => h("th", t)))),
      h("tbody", view.results.map((r) => h("tr", [r.round, r.hands, r.left, r.bonus, r.score, r.passed ? "passed" : "ended"].map((v) => h("td", String(v))))))) : null,
    fairness(view.commitment, view.seed)));
}

function stat(label, value, id) {
  return h("div.stat", h("dt", label), h("dd", { id: `stat-${id}` }, String(value)));
}

/** Leave a finished session and start a new random deal of the same game. */
export async function playAgain(ctx, table, game) {
  await ctx.leave(table.id);
  const reply = await ctx.send({ type: "start_solitaire", game });
  if (reply) ctx.open(reply.table.id, "seat");
  else ctx.lobby();
}
