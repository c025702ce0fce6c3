// Blue Jacket: three rows of eight piles, the Aces pile, the bottom row and the stock. Click a
// card then its destination, or drag it there; dropping a card on another single row card
// interchanges them when that is legal. Clicking the stock deals; when it cannot, the stock
// says why. A move that empties a row pile while no starting card for that row is in play
// asks first: until the pile is filled again, the stock cannot deal.
// Hint highlights the suggested move's source and destination; Undo takes back moves made since
// the last deal (see assist.js). Keys: D deals, A sends a bottom-row Ace to the Aces pile, H hint,
// U undo, Esc clears the selection.

import { assistButtons, assistKey, hintOf, hintSpots, rankingLine } from "./assist.js";
import { ask } from "./ask.js";
import { arrowFocus, h, swap } from "./dom.js";
import { standardCard, cardBack } from "./cards.js";
import { fairness } from "./fairness.js";
import { celebrate } from "./motion.js";
import { parLine } from "./par.js";
import { playAgain } from "./piles.js";
import { count, listing, standardName } from "./words.js";

const ROW_BUILDS = ["2 · 5 · 8 · J", "3 · 6 · 9 · Q", "4 · 7 · 10 · K"];
const STARTERS = ["Two", "Three", "Four"];
const selections = new Map(); // table id -> { seq, source }
const AUTO_ACES_KEY = "blackdrez.autoAces";
const autoPlayed = new Map(); // table id -> the seq at which an automatic Ace move was sent

export function resetBlueJacket(id) { selections.delete(id); }

function selectionOf(table) {
  let selection = selections.get(table.id);
  if (!selection || selection.seq !== table.seq) {
    selection = { seq: table.seq, source: null };
    selections.set(table.id, selection);
  }
  return selection;
}

/** The legal action taking the card at ``source`` to ``target``, if any. */
function actionFor(legal, source, target) {
  return legal.find((a) => a.type === "move" && a.source === source && a.target === target)
    ?? legal.find((a) => a.type === "interchange" && ((a.a === source && a.b === target) || (a.a === target && a.b === source)));
}

function targetsOf(legal, source) {
  const found = new Set();
  for (const a of legal) {
    if (a.type === "move" && a.source === source) found.add(a.target);
    if (a.type === "interchange" && a.a === source) found.add(a.b);
    if (a.type === "interchange" && a.b === source) found.add(a.a);
  }
  return found;
}

export function renderBlueJacket(ctx, table, screen) {
  const { view, legal } = table;
  if (!view) {
    swap(screen, h("p.loading", "Dealing…"));
    return;
  }
  const selection = selectionOf(table);
  const autoAces = localStorage.getItem(AUTO_ACES_KEY) === "1";
  if (autoAces && !view.over && autoPlayed.get(table.id) !== table.seq) {
    // Moving a bottom-row Ace to the Aces pile is never worse (RULES.md), so it may be automatic.
    const ace = legal.find((a) => a.type === "move" && a.target === "aces" && a.source.startsWith("b"));
    if (ace) {
      autoPlayed.set(table.id, table.seq);
      ctx.act(table.id, ace);
    }
  }
  const redraw = () => renderBlueJacket(ctx, table, screen);
  const hinted = hintSpots(hintOf(table));
  const describe = (action) => describeAction(view, action);
  const sources = new Set(legal.flatMap((a) => (a.type === "move" ? [a.source] : a.type === "interchange" ? [a.a, a.b] : [])));
  const targets = selection.source ? targetsOf(legal, selection.source) : new Set();
  const play = (action) => {
    selection.source = null;
    ctx.act(table.id, action);
    redraw();
  };
  const tryPlay = (source, target) => {
    const action = actionFor(legal, source, target);
    const risk = action ? deadEnd(view, action) : "";
    if (risk) { // asked first: a move the player may not have seen the cost of
      selection.source = null;
      redraw();
      ask({ title: "Empty this pile?", text: risk, yes: "Move anyway", no: "Take it back" })
        .then((yes) => { if (yes) play(action); });
      return true;
    }
    if (action) play(action);
    return Boolean(action);
  };
  const click = (location) => {
    if (view.over) return;
    if (selection.source === location) selection.source = null;
    else if (selection.source && tryPlay(selection.source, location)) return;
    else if (sources.has(location)) selection.source = location;
    else if (selection.source) {
      ctx.toast("That card cannot go there");
      selection.source = null;
    } else {
      const why = stuckReason(view, location);
      if (why) ctx.toast(why, "info");
    }
    redraw();
  };

  const pile = (location, cards, label, extra = "") => {
    const available = sources.has(location);
    const classes = [
      "bj-pile", extra, cards.length ? "" : "empty",
      selection.source === location ? "selected" : "",
      targets.has(location) ? "target" : "",
      available ? "available" : "",
      hinted.from.has(location) ? "hinted-from" : "",
      hinted.to.has(location) ? "hinted-to" : "",
    ].join(" ");
    return h("button", {
      class: classes,
      dataset: { loc: location, key: location },
      // One stop for Tab on the whole board (the pile last focused); arrows move between piles.
      tabindex: location === (roving.get(table.id) ?? "b1") ? "0" : "-1",
      onfocus: () => roving.set(table.id, location),
      "aria-label": `${label}: ${cards.length ? cards.map(standardName).join(", ") : "empty"}${selection.source === location ? ", selected" : ""}${targets.has(location) ? ", a legal target" : ""}`,
      "aria-pressed": selection.source === location ? "true" : null,
      draggable: available && !view.over ? "true" : null,
      disabled: view.over,
      onclick: () => click(location),
      ondragstart: (e) => {
        e.dataTransfer.setData("text/plain", location);
        e.dataTransfer.effectAllowed = "move";
        selection.source = location;
        // Redraw after the drag began, so the highlighted targets show while dragging.
        setTimeout(redraw, 0);
      },
      ondragover: (e) => {
        if (selection.source && targets.has(location)) e.preventDefault();
      },
      ondrop: (e) => {
        e.preventDefault();
        const source = e.dataTransfer.getData("text/plain") || selection.source;
        if (source && source !== location && !tryPlay(source, location)) ctx.toast("That card cannot go there");
      },
      ondragend: () => { if (selection.source) { selection.source = null; redraw(); } },
    }, cards.length ? cards.map((c) => standardCard(c)) : h("span.slot-label", emptyLabel(location, label)));
  };

  const rows = view.rows.map((row, r) => h("div.bj-row", { dataset: { row: r + 1 } },
    h("div.row-label", h("strong", `Row ${r + 1}`), h("span.muted", ROW_BUILDS[r])),
    h("div.row-piles", row.map((cards, p) => pile(`r${r + 1}.${p + 1}`, cards, `Row ${r + 1} pile ${p + 1}`, cards.length && Number(rankOf(cards[0])) === r + 2 ? "foundation" : "")))));
  const canDeal = legal.some((a) => a.type === "deal");
  const stockWhy = canDeal ? "" : stockReason(view);
  const aces = view.aces;
  swap(screen, h("div.solitaire.bluejacket",
    h("div.table-head",
      h("h2", "Blue Jacket"),
      h("dl.stats", stat("Score", `${view.score}`, "score"), stat("Moves", view.moves, "moves"), stat("Stock", view.stock_count, "stock"))),
    rankingLine(table),
    view.over ? h("div.final", { role: "status" },
      view.won ? h("p.win-line", "You won!") : null,
      h("p.final-score", view.won ? "Final score " : "Game over — final score ", h("strong", { id: "final-score" }, String(view.score)), " of 104"),
      h("p.why", ENDINGS[view.ending] ?? ""),
      parLine(table, "seeing the stock")) : null,
    view.progress === false && !view.over ? h("p.warning", { role: "status" }, "No sequence of moves can put another card on a foundation: your score is final.") : null,
    h("div.bj-top",
      h("button", {
        id: "stock", class: `bj-stock ${canDeal ? "target" : ""} ${hinted.from.has("stock") ? "hinted-from" : ""}`, disabled: !canDeal, dataset: { key: "stock" },
        "aria-label": `Stock, ${count(view.stock_count, "card")}${canDeal ? ": deal one card on every bottom pile" : `: cannot deal. ${stockWhy}`}`,
        "aria-describedby": canDeal ? null : "stock-why",
        title: canDeal ? "Deal a card on every bottom pile (D)" : stockWhy,
        onclick: () => play({ type: "deal" }),
      }, cardBack(String(view.stock_count)), h("span.deal-label", canDeal ? "Deal" : "Stock")),
      !canDeal && !view.over ? h("p.stock-why", { id: "stock-why" }, stockWhy) : null,
      h("div.aces-wrap",
        pile("aces", aces.length ? [aces[aces.length - 1]] : [], `Aces pile, ${aces.length} of 8`, "aces"),
        h("span.muted", `Aces ${aces.length}/8`))),
    h("div.bj-rows", rows),
    h("div.bj-bottom",
      h("div.row-label", h("strong", "Bottom row")),
      h("div.row-piles", view.bottom.map((cards, i) => pile(`b${i + 1}`, cards, `Bottom pile ${i + 1}`, "bottom")))),
    h("div.controls",
      h("label.check.auto-aces", h("input", {
        type: "checkbox", id: "auto-aces", checked: autoAces,
        onchange: (e) => { localStorage.setItem(AUTO_ACES_KEY, e.target.checked ? "1" : "0"); redraw(); },
      }), " Move bottom-row Aces automatically"),
      ...(view.over ? [] : assistButtons(ctx, table, describe, redraw)),
      !view.over ? h("button", { id: "resign", dataset: { key: "resign" }, onclick: async () => { if (await ask({ title: "Resign this game?", text: "Your score stays as it is now.", yes: "Resign", no: "Play on", danger: true })) play({ type: "resign" }); } }, "Resign") : null,
      h("span.spacer"),
      h("button", { dataset: { key: "help" }, onclick: () => ctx.help("blue_jacket") }, "How to play"),
      view.over ? h("button.primary", { dataset: { key: "again" }, onclick: () => playAgain(ctx, table, "blue_jacket") }, "Play again") : null,
      view.over
        ? h("button", { dataset: { key: "leave" }, onclick: () => ctx.leave(table.id) }, "Back to lobby")
        : h("button", { dataset: { key: "lobby" }, onclick: () => ctx.lobby() }, "Lobby")),
    fairness(view.commitment, view.seed)));
  // The end at the top of the game, brought into view (the last move may be far below it).
  if (view.over) celebrate(screen.querySelector(".final"), `${table.id}:${view.seed}`, view.won);

  ctx.shortcuts = view.over ? {} : {
    key: (event) => {
      if (event.key === "d" && canDeal) play({ type: "deal" });
      else if (event.key === "a") {
        const ace = legal.find((a) => a.type === "move" && a.target === "aces" && a.source.startsWith("b"));
        if (ace) play(ace);
        else ctx.toast("No Ace is on top of a bottom pile.", "info");
      } else if (event.key === "Escape" && selection.source) { selection.source = null; redraw(); }
      else if (arrowFocus(event, screen, ".bj-pile, #stock")) return true;
      else return assistKey(ctx, table, describe, redraw, event);
      return true;
    },
  };
}

const roving = new Map(); // table id -> the pile Tab stops at (the last one focused)

const ENDINGS = {
  won: "Every card is on a foundation.",
  resigned: "You resigned.",
  no_moves: "No move was left.",
};

/** The empty row piles (as "row R pile P"), row by row. */
function emptyRowPiles(view) {
  return view.rows.flatMap((row, r) => row.map((cards, p) => (cards.length ? null : { row: r, pile: p })).filter(Boolean));
}

/** Why the stock cannot deal now. */
function stockReason(view) {
  if (view.over) return "The game is over.";
  if (!view.stock_count) return "The stock is empty: there are no more deals.";
  const empty = emptyRowPiles(view);
  if (!empty.length) return "";
  const where = listing(empty.map((e) => `row ${e.row + 1} pile ${e.pile + 1}`));
  const needs = listing([...new Set(empty.map((e) => STARTERS[e.row]))]);
  return `The stock deals only while every row pile holds a card: ${where} ${empty.length === 1 ? "is" : "are"} empty. Fill ${empty.length === 1 ? "it" : "them"} with a ${needs} (any suit).`;
}

/** The warning for a move that leaves a row pile empty with no starting card for its row in
 * play (and cards still in the stock), or "" when there is nothing to fear. */
function deadEnd(view, action) {
  if (action.type !== "move" || !action.source.startsWith("r") || !view.stock_count) return "";
  const row = Number(action.source[1]) - 1;
  const starter = row + 2;
  // In play: the top card of each bottom pile, and the misplaced cards of the rows.
  const inPlay = [
    ...view.bottom.map((pile) => pile.at(-1)),
    ...view.rows.flatMap((piles, r) => piles.map((pile, p) => (
      pile.length === 1 && rankOf(pile[0]) !== r + 2 && `r${r + 1}.${p + 1}` !== action.source ? pile[0] : undefined))),
  ].filter(Boolean);
  if (inPlay.some((card) => rankOf(card) === starter)) return "";
  const [r, p] = action.source.slice(1).split(".");
  return `This move empties row ${r} pile ${p}, and no ${STARTERS[row]} is in play to fill it. Until one fills it, the stock cannot deal. Move anyway?`;
}

/** A location in words: "bottom pile 3", "row 1 pile 2", "the Aces pile". */
function placeName(location) {
  if (location === "aces") return "the Aces pile";
  if (location.startsWith("b")) return `bottom pile ${location.slice(1)}`;
  const [r, p] = location.slice(1).split(".");
  return `row ${r} pile ${p}`;
}

/** The card a location offers (a bottom pile's top, a row pile's card). */
function cardAt(view, location) {
  if (location.startsWith("b")) return view.bottom[Number(location.slice(1)) - 1].at(-1);
  const [r, p] = location.slice(1).split(".").map(Number);
  return view.rows[r - 1][p - 1].at(-1);
}

/** A hinted action in words. */
function describeAction(view, action) {
  switch (action?.type) {
    case "move": return `move the ${standardName(cardAt(view, action.source))} from ${placeName(action.source)} to ${placeName(action.target)}.`;
    case "interchange": return `swap the cards of ${placeName(action.a)} and ${placeName(action.b)}.`;
    case "deal": return "deal from the stock.";
    case "resign": return "no move helps any more: resign.";
    default: return "no move is left.";
  }
}

/** What an empty pile shows: a row pile, the starting rank it takes. */
function emptyLabel(location, label) {
  if (!location.startsWith("r")) return label.split(",")[0];
  return `takes a ${STARTERS[Number(location[1]) - 1]}`;
}

/** Why the card at ``location`` cannot move now (it is no source of a legal move), in words;
 * null for an empty pile. */
function stuckReason(view, location) {
  let cards;
  let name;
  const row = /^r(\d)\.(\d)$/.exec(location);
  if (location === "aces") return view.aces?.length ? "Aces on the Aces pile stay there." : null;
  if (row) {
    cards = view.rows[Number(row[1]) - 1][Number(row[2]) - 1];
    name = `Row ${row[1]} pile ${row[2]}`;
    if (cards.length && rankOf(cards[0]) === Number(row[1]) + 1) {
      return `${name} is started with its row's ${standardName(cards[0]).split(" ")[0]}: its cards stay there (build on it instead).`;
    }
  } else if (/^b\d$/.test(location)) {
    cards = view.bottom[Number(location.slice(1)) - 1];
    name = `Bottom pile ${location.slice(1)}`;
  } else return null;
  if (!cards?.length) return null;
  return `The ${standardName(cards[cards.length - 1])} (${name.toLowerCase()}) has nowhere to go now: no pile takes it.`;
}

function rankOf(card) {
  return { A: 1, T: 10, J: 11, Q: 12, K: 13 }[card[0]] ?? Number(card[0] ?? 0);
}

function stat(label, value, id) {
  return h("div.stat", h("dt", label), h("dd", { id: `stat-${id}` }, String(value)));
}
