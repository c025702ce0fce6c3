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
    '<path d="M7 31 C8 22 5 15 2 8 C10 9 16 15 20 22 C24 15 30 9 38 8 C35 15 32 22 33 31 Z" fill="currentColor"/>' +
    '<circle cx="2.8" cy="7.5" r="2.8" fill="currentColor"/><circle cx="37.2" cy="7.5" r="2.8" fill="currentColor"/>' +
    '<circle cx="20" cy="22" r="2.2" fill="#fff"/>' +
    '<rect x="6" y="31" width="28" height="5" rx="2.5" fill="currentColor"/>';
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
