// Rules and help for each game, in the client: a dialog with one page per game (short, in our
// own words; docs/rules/*.md has the full text), the keys, and tips for a first game.

import { h } from "./dom.js";
import { GAMES as LISTED, GAME_NAMES } from "./games.js";

const GAMES = Object.entries(GAME_NAMES);
/** The rules text each game's spec gives: the page of a game with none of its own here. */
const RULES = Object.fromEntries(LISTED.map((g) => [g.name, g.rules]));

const PAGES = {
  blackdrez: () => [
    h("p", "A race to exactly 11 for 2 to 8 players. Every card is face up; win rounds to collect cards. The biggest pile at the end wins."),
    h("h3", "Card points"),
    h("p", "The big number in a card's corner is what it is worth: Queen 5, Rook 4, Bishop 3, Knight 2, Pawn 1, Joker 6 or 1 (whichever is better for you). The small coloured number only tells two cards apart."),
    h("h3", "A round"),
    h("ul",
      h("li", "Everyone gets two cards. A hand of exactly 11 wins the round at once."),
      h("li", "The lowest hand plays, and keeps playing while it is still the lowest."),
      h("li", h("strong", "Hit"), ": take a card. Over 11 you are bust and out; exactly 11 wins."),
      h("li", h("strong", "Withdraw"), ": leave the round and keep half of your cards (rounded down, the first ones you got)."),
      h("li", h("strong", "Stand"), ": only when every hand still in the round has the same value. If everybody stands in turn, they share the pot."),
      h("li", "The last player left in a round wins it too.")),
    h("h3", "Winning"),
    h("p", "The round's winner takes every card on the table into their pile. Several winners share equally; cards that cannot be shared are carried over to the next round's winner. The game ends when the stock cannot deal another round (or after the table's last round). Most cards wins."),
    h("h3", "Keys"),
    h("p", h("kbd", "H"), " hit · ", h("kbd", "S"), " stand · ", h("kbd", "W"), " withdraw"),
    h("h3", "First game"),
    h("ul",
      h("li", "Press Add bot to fill empty seats, then Start game: you play too."),
      h("li", "Low hands are safe to hit: with 6 or less no single card can bust you."),
      h("li", "Withdrawing early keeps a card; going bust keeps nothing.")),
  ],
  blackjack_piles: () => [
    h("p", "A solitaire in seven rounds. Build piles from the stock and take cards away in hands worth exactly 21. Make more hands than the cards you leave behind to reach the next round."),
    h("h3", "Values"),
    h("p", "2 to 9 count their number; 10, Jack, Queen and King count 10; an Ace counts 1 or 11."),
    h("h3", "Playing"),
    h("ul",
      h("li", h("strong", "Place"), ": put the stock's top card on a pile: click an empty pile, or a pile's ", h("em", "Place here"), " button."),
      h("li", h("strong", "Cash"), ": click 2 to 6 cards in play (the top card of each pile) that can make 21; the hand is taken at once. In rounds 1 to 3 the stock's card may be part of it."),
      h("li", h("strong", "Move"), ": select a pile's top card, then click an empty pile."),
      h("li", "When the stock is empty, End round. Some rounds cap the cards a pile holds.")),
    h("h3", "Score"),
    h("p", "Each round scores (hands + a bonus for leaving 3 or fewer cards) × the round number."),
    h("p", "You reach the next round when your hands that round outnumber the cards left on the piles and in the stock as it ends: the count ", h("em", "Left (piles + stock)"), " at the top."),
    h("h3", "Hint and Undo"),
    h("p", "Hint shows the best bot's move. Undo takes back your moves since a new card was last shown. Placing a card shows the stock's next one, so a placement cannot be taken back: you would choose again knowing a card you could not have known. Moving a pile's top card and cashing a hand without the stock's card can be. A game with hints or undos is ranked apart."),
    h("h3", "Keys"),
    h("p", h("kbd", "←"), h("kbd", "↑"), h("kbd", "→"), h("kbd", "↓"), " move between the stock's card and the piles · ", h("kbd", "Enter"), " select a card, or place the stock's card · ",
      h("kbd", "1"), "–", h("kbd", "5"), " select a pile's top card · ", h("kbd", "S"), " select the stock's card · ",
      h("kbd", "Shift"), "+", h("kbd", "1"), "–", h("kbd", "5"), " place on that pile · ", h("kbd", "E"), " end the round · ", h("kbd", "H"), " hint · ", h("kbd", "U"), " undo · ", h("kbd", "Esc"), " clear"),
  ],
  blue_jacket: () => [
    h("p", "A patience with two decks. Build the three rows up in steps of three, one suit per pile, and put all eight Aces on the Aces pile."),
    h("h3", "The rows"),
    h("p", "Row 1 builds 2, 5, 8, Jack; row 2 builds 3, 6, 9, Queen; row 3 builds 4, 7, 10, King. A pile whose first card is not its row's start (a misplaced card) takes nothing until that card moves away."),
    h("h3", "Moves"),
    h("ul",
      h("li", "Click a card (a bottom card, or a misplaced row card), then where it goes. Or drag it."),
      h("li", "An empty row pile takes only its row's starting rank (2, 3 or 4)."),
      h("li", "Drop a lone misplaced card on another to swap them when each starts the other's row."),
      h("li", "An empty bottom pile takes any card."),
      h("li", h("strong", "Deal"), " puts a card on every bottom pile, but only while every row pile holds a card. Keep a starter (2, 3 or 4) at hand before you empty a row pile.")),
    h("h3", "Hint and Undo"),
    h("p", "Hint shows the best bot's move. Undo takes back your moves since the last Deal: a Deal shows new cards, so it cannot be taken back. A game with hints or undos is ranked apart."),
    h("h3", "Keys"),
    h("p", h("kbd", "←"), h("kbd", "↑"), h("kbd", "→"), h("kbd", "↓"), " move between piles · ", h("kbd", "Enter"), " pick a card, then its place · ", h("kbd", "D"), " deal · ", h("kbd", "A"), " a bottom Ace to the Aces pile · ", h("kbd", "H"), " hint · ", h("kbd", "U"), " undo · ", h("kbd", "Esc"), " clear the selection"),
  ],
};

let dialog = null;

/** Open the rules dialog at ``game``'s page. */
export function showHelp(game = "blackdrez") {
  if (!dialog) {
    dialog = h("dialog#help.help", { "aria-labelledby": "help-title" });
    document.body.append(dialog);
  }
  const page = h("div.help-page", { role: "tabpanel", "aria-labelledby": "help-title" });
  const tabs = GAMES.map(([key, label]) => h("button", {
    role: "tab", dataset: { game: key }, "aria-selected": key === game ? "true" : "false",
    onclick: () => select(key),
  }, label));
  const select = (key) => {
    for (const tab of tabs) tab.setAttribute("aria-selected", tab.dataset.game === key ? "true" : "false");
    page.replaceChildren(...(PAGES[key]?.() ?? [h("p", RULES[key] || "No rules were given for this game.")]));
  };
  dialog.replaceChildren(
    h("div.help-head", h("h2#help-title", "How to play"),
      h("button.close", { "aria-label": "Close", onclick: () => dialog.close() }, "✕")),
    h("div.tabs", { role: "tablist" }, tabs),
    page);
  select(game);
  if (!dialog.open) dialog.showModal();
}
