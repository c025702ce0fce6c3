// The rating people see, on a 1500-based scale like chess sites': a new player shows 1500. Pure
// (no DOM), so that a test runs it with node beside its twin, ratings.display in
// server/records/ratings.py: the same arithmetic, the same numbers. The server's ordinal
// (μ − 3σ, Weng-Lin) starts at 0 and goes negative after a first loss; nobody reads that.

export const DISPLAY_BASE = 1500;
/** Shown points per unit of ordinal: a regular player shows about 1600 (weak) to 2000 (good). */
export const DISPLAY_SCALE = 20;
export const DISPLAY_FLOOR = 100;

/** The shown rating of ``ordinal``: 1500 + 20 × ordinal, halves rounded up, at least 100. */
export function ratingDisplay(ordinal) {
  return Math.max(DISPLAY_FLOOR, Math.floor(DISPLAY_BASE + DISPLAY_SCALE * ordinal + 0.5));
}

/** How a game moved the shown rating, from ordinal ``before`` to ``after`` (the difference of
 * the shown numbers, so "1512 → 1526 (+14)" always adds up). */
export function ratingChange(before, after) {
  return ratingDisplay(after) - ratingDisplay(before);
}

/** "+14", "−9" (a real minus sign), "±0". */
export function signedChange(change) {
  return change > 0 ? `+${change}` : change < 0 ? `\u2212${-change}` : "\u00b10";
}
