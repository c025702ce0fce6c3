// The par of a finished solitaire: what perfect play, seeing the cards to come, scores on the
// same deal (the server's `par` table event, right after `game_over`), shown beside the score.

import { h } from "./dom.js";

/** The `par` event of the table's last game, or null (not finished yet, or not a solitaire). */
export function parOf(table) {
  const last = table.log.findLast((n) => ["par", "game_started"].includes(n.event.type))?.event;
  return last?.type === "par" ? last : null;
}

/** "Par 104 (perfect play, seeing the stock): you scored 62." — or null without a par. */
export function parLine(table, seeing) {
  const par = parOf(table);
  if (!par) return null;
  const value = `${par.par}${par.exact ? "" : "+"}`;
  const gap = par.par - par.score;
  return h("p.par", { id: "par" },
    "Par ", h("strong", { id: "par-score", title: par.exact ? "exact" : "the best a bounded search found: perfect play may score more" }, value),
    ` (perfect play, ${seeing}): `,
    gap === 0 ? "you matched it." : `you scored ${par.score}, ${gap} short.`);
}
