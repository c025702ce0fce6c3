// Hint and Undo for both solitaires, and the session's ranking line.
// Hint asks the server for the best bot's move and highlights its source and destination until
// the next move (its message goes then too, or when the player leaves the game); Undo takes back
// moves made since the last card was revealed (the server keeps the count in info.undoable, so
// the button says why it is disabled). A game with hints or undos is ranked apart: the line
// above the board says whether (and how) this game is ranked.

import { h } from "./dom.js";
import { count } from "./words.js";

const hints = new Map(); // table id -> { seq, action }
const asking = new Set(); // table ids whose hint is being asked

/** The hinted action of this table, while no move was made since it was given. */
export function hintOf(table) {
  const hint = hints.get(table.id);
  return hint && hint.seq === table.seq ? hint.action : null;
}

/** The spots a hinted action moves a card from and to, as the renderers name them:
 * Blue Jacket locations ("b3", "r1.2", "aces", "stock"), Blackjack Piles pile indices and
 * "stock". */
export function hintSpots(action) {
  const from = new Set();
  const to = new Set();
  if (!action) return { from, to };
  switch (action.type) {
    case "move": from.add(action.source); to.add(action.target); break;
    case "interchange": from.add(action.a); to.add(action.b); break;
    case "deal": from.add("stock"); break;
    case "place": from.add("stock"); to.add(action.pile); break;
    case "cash":
      for (const pile of action.piles) from.add(pile);
      if (action.stock) from.add("stock");
      break;
    default: break;
  }
  return { from, to };
}

/** Ask for a hint, remember it for this position, say it in words and redraw. */
export async function askHint(ctx, table, describe, redraw) {
  const seq = table.seq;
  const known = hintOf(table);
  if (known) { // asked again in the same position: said again, not asked again
    ctx.toast(`Hint: ${describe(known)}`, "info", "hint");
    return;
  }
  if (asking.has(table.id)) return; // one question at a time: the answer is on its way
  asking.add(table.id);
  let reply;
  try {
    reply = await ctx.send({ type: "hint", table: table.id }, (error) => {
      if (error.code !== "rate_limited") return false;
      ctx.toast("Hints come one a second at most: ask again in a moment.", "info", "hint");
      return true;
    });
  } finally {
    asking.delete(table.id);
  }
  if (!reply) return;
  hints.set(table.id, { seq, action: reply.action });
  // The expert gives hints; a quicker bot when the server's expert was busy or late.
  const quick = reply.by && reply.by !== "expert" ? ` (a quick ${reply.by} hint: the expert was busy)` : "";
  ctx.toast(`Hint: ${describe(reply.action)}${quick}`, "info", "hint");
  redraw();
}

/** Take back the last move (the server refuses when nothing can be). */
export function undo(ctx, table) {
  return ctx.send({ type: "undo", table: table.id });
}

/** The Hint and Undo buttons. */
export function assistButtons(ctx, table, describe, redraw) {
  const info = table.info ?? {};
  const undoable = info.undoable ?? 0;
  const why = undoable
    ? `Take back your last move (U): ${count(undoable, "move")} can be taken back`
    : "Nothing to undo: moves made before the last card was revealed cannot be taken back";
  return [
    h("button", {
      id: "hint", dataset: { key: "hint" },
      title: "Show a good move (H). A game with hints is ranked apart.",
      onclick: () => askHint(ctx, table, describe, redraw),
    }, "Hint"),
    h("button", {
      id: "undo", dataset: { key: "undo" }, disabled: !undoable, title: why, "aria-label": `Undo. ${why}`,
      onclick: () => undo(ctx, table),
    }, "Undo"),
  ];
}

/** Keys for the two buttons: H for a hint, U (or Ctrl+Z) to undo. */
export function assistKey(ctx, table, describe, redraw, event) {
  if (event.key === "h") askHint(ctx, table, describe, redraw);
  else if (event.key === "u" || (event.key === "z" && (event.ctrlKey || event.metaKey))) {
    if (table.info?.undoable) undo(ctx, table);
    else ctx.toast("Nothing to undo: moves made before the last card was revealed cannot be taken back.", "info");
  } else return false;
  return true;
}

/** One line on how this game counts: ranked (daily or random deal), ranked apart, or not. */
export function rankingLine(table) {
  const info = table.info;
  if (!info) return null;
  const deal = info.daily ? `Daily deal of ${info.daily}` : "Random deal";
  let text;
  if (!info.ranked) {
    text = info.daily
      ? `${deal}: practice, not ranked (your first try today was).`
      : "Numbered deal: not ranked (anyone can compute its cards).";
  } else if (info.hints || info.undos) {
    const used = [info.hints ? count(info.hints, "hint") : null, info.undos ? count(info.undos, "undo") : null].filter(Boolean).join(", ");
    text = `${deal} · ranked apart (${used})`;
  } else {
    text = `${deal} · ranked`;
  }
  return h("p.session-ranking", { id: "ranking" }, text);
}
