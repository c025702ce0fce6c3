// Any game this client has no renderer of its own for (app.js's RENDERERS): its view as fields,
// cards drawn as cards, a button per legal action, and the way back. The replay viewer shows
// such a game's steps with the same fields. Its rules come with the game (games.js).

import { h, swap } from "./dom.js";
import { standardCard } from "./cards.js";
import { fairness } from "./fairness.js";
import { GAME_NAMES } from "./games.js";
import { playAgain } from "./piles.js";

const CARD = /^[2-9TJQKA][CDHS]$/;
const SHOWN_APART = new Set(["commitment", "seed"]);

/** One value of a view: a standard card, a list (of cards or values), a nested view, or text. */
function value(item) {
  if (typeof item === "string" && CARD.test(item)) return standardCard(item);
  if (Array.isArray(item)) return item.length ? h("span.cards", item.map(value)) : h("span.muted", "none");
  if (item !== null && typeof item === "object") return viewFields(item);
  return h("span", item === null ? "—" : String(item));
}

/** A view as a list of its fields (the commitment and the seed go to the fairness box). */
export function viewFields(view) {
  return h("dl.generic-view", Object.entries(view)
    .filter(([key]) => !SHOWN_APART.has(key))
    .flatMap(([key, item]) => [h("dt", key.replaceAll("_", " ")), h("dd", { dataset: { field: key } }, value(item))]));
}

/** An action in words: its type, then any fields it has ("move r1 to b2"). */
function actionLabel(action) {
  const fields = Object.entries(action).filter(([key]) => key !== "type").map(([, item]) => String(item));
  return [action.type.replaceAll("_", " "), ...fields].join(" ");
}

export function renderGeneric(ctx, table, screen) {
  const { view, legal, info } = table;
  const game = info.game;
  if (!view) {
    swap(screen, h("p.loading", "Dealing…"));
    return;
  }
  const over = info.status === "finished";
  swap(screen, h("section.panel.generic-game", { dataset: { game } },
    h("div.panel-head", h("h2", GAME_NAMES[game] ?? game),
      h("button.link", { type: "button", onclick: () => ctx.help(game) }, "How to play")),
    viewFields(view),
    h("div.actions", legal.map((action) => h("button", {
      type: "button", dataset: { key: `act-${actionLabel(action)}`, action: action.type },
      onclick: () => ctx.act(table.id, action),
    }, actionLabel(action)))),
    h("div.buttons",
      over && table.seat !== null && info.seats.length === 1
        ? h("button.primary", { type: "button", dataset: { key: "again" }, onclick: () => playAgain(ctx, table, game) }, "Play again")
        : null,
      over
        ? h("button", { type: "button", dataset: { key: "leave" }, onclick: () => ctx.leave(table.id) }, "Back to lobby")
        : h("button", { type: "button", dataset: { key: "lobby" }, onclick: () => ctx.lobby() }, "Lobby")),
    fairness(view.commitment ?? info.commitment ?? null, view.seed ?? null)));
  ctx.shortcuts = {};
}
