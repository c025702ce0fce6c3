// Cards on screen: PokerDrez cards (what counts, the points, is the biggest mark; the figure in
// the middle; the number that only tells cards apart is a small badge in its colour) and
// standard cards. Every card says what it is in words on hover and to screen readers.

import { h } from "./dom.js";
import { FIGURES, NUMBER_COLOURS, pokerName, standardName } from "./words.js";

/** A jester's cap: the Joker has no chess piece. */
function jokerSvg() {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 40 40");
  svg.setAttribute("aria-hidden", "true");
  svg.classList.add("joker");
  svg.innerHTML =
    '<path d="M7 31 C8 22 5 15 2 8 C10 9 16 15 20 22 C24 15 30 9 38 8 C35 15 32 22 33 31 Z" fill="currentColor"/>' +
    '<circle cx="2.8" cy="7.5" r="2.8" fill="currentColor"/><circle cx="37.2" cy="7.5" r="2.8" fill="currentColor"/>' +
    '<circle cx="20" cy="22" r="2.2" fill="#fff"/>' +
    '<rect x="6" y="31" width="28" height="5" rx="2.5" fill="currentColor"/>';
  return svg;
}

/** A PokerDrez card. ``tag`` may be "button" for a clickable card. */
export function pokerCard(code, { tag = "span", small = false, ...attrs } = {}) {
  const figure = FIGURES[code[0]];
  const number = Number(code.slice(1));
  const colour = NUMBER_COLOURS[number];
  const name = pokerName(code);
  return h(`${tag}.card.poker.n-${colour}${small ? ".small" : ""}`,
    { title: name, "aria-label": name, role: tag === "span" ? "img" : null, dataset: { card: code }, ...attrs },
    h("span.points", { "aria-hidden": "true" }, figure.points === "6/1" ? ["6", h("small", "/1")] : figure.points),
    h("span.number", { "aria-hidden": "true" }, String(number)),
    h("span.figure", { "aria-hidden": "true" }, figure.glyph ?? jokerSvg()),
    h("span.figure-name", { "aria-hidden": "true" }, figure.name),
  );
}

/** A standard playing card. */
export function standardCard(code, { tag = "span", ...attrs } = {}) {
  const suit = { C: "♣", D: "♦", H: "♥", S: "♠" }[code[1]];
  const red = code[1] === "D" || code[1] === "H";
  const rank = code[0] === "T" ? "10" : code[0];
  return h(`${tag}.card.standard${red ? ".red" : ""}`,
    { title: standardName(code), "aria-label": standardName(code), role: tag === "span" ? "img" : null, dataset: { card: code }, ...attrs },
    h("span.corner", { "aria-hidden": "true" }, rank, h("br"), suit),
    h("span.pip", { "aria-hidden": "true" }, suit),
  );
}

/** The back of a card (the stock). */
export function cardBack(label, { tag = "span", ...attrs } = {}) {
  return h(`${tag}.card.back`, { "aria-label": label, title: label, ...attrs }, h("span.count", label));
}
