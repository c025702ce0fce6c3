// A player's BlackDrez rating wherever it is shown: the seats of a rated table and the lobby's
// table list (the server puts it in each seat of the table info, ``seats[].rating``), the ratings
// page and the profiles (records.js). People see it on a 1500-based scale (scale.js, the twin of
// the server's ratings.display): never the raw ordinal μ − 3σ, a small number that starts at 0
// and can be negative. A provisional rating (fewer than ten rated games, the server decides) is
// marked with "?" and its tooltip says why.

import { h } from "./dom.js";
import { ratingChange, ratingDisplay, signedChange } from "./scale.js";

export { ratingChange, ratingDisplay, signedChange };

const PROVISIONAL_GAMES = 10;

/** "1569", or "1569?" while provisional. */
export function ratingText(rating) {
  return `${ratingDisplay(rating.ordinal)}${rating.provisional ? "?" : ""}`;
}

/** The tooltip of a shown rating: the games behind it and, while provisional, why the "?". */
export function ratingTitle(rating) {
  const shown = ratingDisplay(rating.ordinal);
  const games = rating.games ? `after ${rating.games} rated game${rating.games === 1 ? "" : "s"}` : "before any rated game";
  const base = `Rating ${shown} ${games} (everyone starts at 1500)`;
  return rating.provisional
    ? `${base}; provisional (“?”) until ${PROVISIONAL_GAMES} rated games: fewer than ${PROVISIONAL_GAMES} rated games so far, so one game still moves it a lot.`
    : `${base}.`;
}

/** A small rating tag for a seat (null without a rating). */
export function ratingTag(rating) {
  if (!rating) return null;
  const shown = ratingDisplay(rating.ordinal);
  return h("span.rating-tag", {
    class: rating.provisional ? "provisional" : null,
    title: ratingTitle(rating),
    "aria-label": `rating ${shown}${rating.provisional ? ", provisional" : ""}`,
    dataset: { rating: String(shown), ordinal: rating.ordinal.toFixed(2), provisional: String(rating.provisional) },
  }, ratingText(rating));
}

const ordinalOf = (rating) => (typeof rating === "number" ? rating : rating.ordinal);

/** A game's effect on a rating, for a game-over panel: "1512 → 1526 (+14)". ``before`` and
 * ``after`` are ratings ({ordinal, ...}, e.g. a seat's before and after the game) or ordinals. */
export function ratingChangeText(before, after) {
  const from = ordinalOf(before);
  const to = ordinalOf(after);
  return `${ratingDisplay(from)} \u2192 ${ratingDisplay(to)} (${signedChange(ratingChange(from, to))})`;
}

/** The signed change alone as an element ("+14" in the accent colour, "−9" in red); its
 * ``data-change`` holds the number. */
export function changeTag(change) {
  const color = change > 0 ? "var(--accent-text)" : change < 0 ? "var(--danger)" : "var(--muted)";
  const tag = h("span.rating-change", {
    dataset: { change: String(change) },
    style: { color, fontWeight: "700", fontVariantNumeric: "tabular-nums" },
  }, signedChange(change));
  // The theme's red is dim on the dark themes (color-scheme: dark): a lighter one there. A
  // browser without light-dark() ignores this and keeps the theme's.
  if (change < 0) tag.style.color = "light-dark(#b3261e, #ff8a80)";
  return tag;
}

/** A "bot" label for a seated bot (null for a person): bots are always shown as bots. */
export function botTag(seat) {
  return seat.bot ? h("span.badge.bot", { title: "A bot: it plays over the same protocol, seeing only its own seat" }, "bot") : null;
}
