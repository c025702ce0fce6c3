// A player's BlackDrez rating where a name is shown at a rated table (the lobby's table list and
// the seats): the server puts it in each seat of the table info (``seats[].rating``). The number
// is the conservative estimate μ − 3σ, as on the ratings page; a provisional rating (fewer than
// ten rated games, the server decides) is marked with "?".

import { h } from "./dom.js";

/** "12.3", or "12.3?" while provisional. */
export function ratingText(rating) {
  return `${rating.ordinal.toFixed(1)}${rating.provisional ? "?" : ""}`;
}

/** A small rating tag for a seat (null without a rating). */
export function ratingTag(rating) {
  if (!rating) return null;
  const games = `${rating.games} rated game${rating.games === 1 ? "" : "s"}`;
  const title = `Rating ${rating.ordinal.toFixed(1)} (μ ${rating.mu.toFixed(1)} − 3σ ${rating.sigma.toFixed(1)}), ${games}${rating.provisional ? ": provisional, it still moves a lot" : ""}`;
  return h("span.rating-tag", {
    class: rating.provisional ? "provisional" : null,
    title,
    "aria-label": `rating ${rating.ordinal.toFixed(1)}${rating.provisional ? ", provisional" : ""}`,
    dataset: { rating: rating.ordinal.toFixed(1), provisional: String(rating.provisional) },
  }, ratingText(rating));
}

/** A "bot" label for a seated bot (null for a person): bots are always shown as bots. */
export function botTag(seat) {
  return seat.bot ? h("span.badge.bot", { title: "A bot: it plays over the same protocol, seeing only its own seat" }, "bot") : null;
}
