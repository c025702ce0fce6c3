// Cards on screen: PokerDrez cards (figure, number 1-9, the number's colour) and standard cards.

import { h } from "./dom.js";

export const FIGURES = {
  Q: { name: "Queen", glyph: "♛", points: "5" },
  R: { name: "Rook", glyph: "♜", points: "4" },
  B: { name: "Bishop", glyph: "♝", points: "3" },
  N: { name: "Knight", glyph: "♞", points: "2" },
  P: { name: "Pawn", glyph: "♟", points: "1" },
  J: { name: "Joker", glyph: null, points: "6/1" },
};

export const NUMBER_COLOURS = [
  null, "gray", "red", "magenta", "purple", "blue", "yellow", "cyan", "orange", "green",
];

const SUITS = {
  C: { name: "Clubs", glyph: "♣", red: false },
  D: { name: "Diamonds", glyph: "♦", red: true },
  H: { name: "Hearts", glyph: "♥", red: true },
  S: { name: "Spades", glyph: "♠", red: false },
};
const RANK_NAMES = { A: "Ace", T: "10", J: "Jack", Q: "Queen", K: "King" };

/** A jester's cap: the Joker has no chess piece. */
function jokerSvg() {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 40 40");
  svg.setAttribute("aria-hidden", "true");
  svg.classList.add("joker");
  svg.innerHTML =
    '<path d="M6 30 L10 10 L20 24 L30 10 L34 30 Z" fill="currentColor"/>' +
    '<path d="M20 24 L20 6" stroke="currentColor" stroke-width="3"/>' +
    '<circle cx="10" cy="9" r="3.2" fill="currentColor"/><circle cx="30" cy="9" r="3.2" fill="currentColor"/>' +
    '<circle cx="20" cy="5" r="3.2" fill="currentColor"/>' +
    '<rect x="5" y="30" width="30" height="5" rx="2" fill="currentColor"/>';
  return svg;
}

/** Describe a PokerDrez card ("Q7") for screen readers and titles. */
export function pokerName(code) {
  const figure = FIGURES[code[0]];
  const number = Number(code.slice(1));
  return `${figure.name} ${number} (${NUMBER_COLOURS[number]}), ${figure.points} points`;
}

/** A PokerDrez card. ``tag`` may be "button" for a clickable card. */
export function pokerCard(code, { tag = "span", small = false, ...attrs } = {}) {
  const figure = FIGURES[code[0]];
  const number = Number(code.slice(1));
  const colour = NUMBER_COLOURS[number];
  return h(`${tag}.card.poker.n-${colour}${small ? ".small" : ""}`,
    { title: pokerName(code), "aria-label": pokerName(code), role: tag === "span" ? "img" : null, dataset: { card: code }, ...attrs },
    h("span.band", { "aria-hidden": "true" }, String(number)),
    h("span.figure", { "aria-hidden": "true" }, figure.glyph ?? jokerSvg()),
    h("span.points", { "aria-hidden": "true" }, figure.points),
  );
}

/** Describe a standard card ("TD") for screen readers. */
export function standardName(code) {
  const rank = RANK_NAMES[code[0]] ?? code[0];
  return `${rank} of ${SUITS[code[1]].name}`;
}

/** A standard playing card. */
export function standardCard(code, { tag = "span", ...attrs } = {}) {
  const suit = SUITS[code[1]];
  const rank = code[0] === "T" ? "10" : code[0];
  return h(`${tag}.card.standard${suit.red ? ".red" : ""}`,
    { title: standardName(code), "aria-label": standardName(code), role: tag === "span" ? "img" : null, dataset: { card: code }, ...attrs },
    h("span.corner", { "aria-hidden": "true" }, rank, h("br"), suit.glyph),
    h("span.pip", { "aria-hidden": "true" }, suit.glyph),
  );
}

/** The back of a card (the stock). */
export function cardBack(label, { tag = "span", ...attrs } = {}) {
  return h(`${tag}.card.back`, { "aria-label": label, title: label, ...attrs }, h("span.count", label));
}
