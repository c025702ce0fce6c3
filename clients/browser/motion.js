// Motion that explains what happened at a table: dealt and hit cards fly in from the stock, and
// at a round's end the cards on the table sweep to the winner's pile. Nothing moves when the
// system asks for reduced motion, or while the page is hidden.
//
// A renderer captures the cards on screen before it re-renders (``capture``) and, after, calls
// ``arrive`` and ``sweep`` with that capture. Cards are matched by their data-motion key.

import { motionAllowed } from "./prefs.js";

/** How many animations ran (the browser tests read it). */
export const motion = { started: 0 };

const FLY = { duration: 420, easing: "cubic-bezier(.2,.7,.3,1)" };

function enabled() {
  return motionAllowed() && !document.hidden && typeof Element.prototype.animate === "function";
}

/** The cards in ``root`` with a data-motion key: their place on screen and a copy of each. */
export function capture(root) {
  const cards = new Map();
  for (const node of root.querySelectorAll("[data-motion]")) {
    cards.set(node.dataset.motion, { rect: node.getBoundingClientRect(), copy: node.cloneNode(true) });
  }
  return cards;
}

function centre(rect) {
  return { x: rect.left + rect.width / 2, y: rect.top + rect.height / 2 };
}

/** Cards now in ``root`` that were not in ``before`` fly in from ``origin`` (the stock), one
 * after the other in document order: a deal, or a hit. */
export function arrive(root, before, origin) {
  if (!origin || !enabled()) return;
  const from = centre(origin.getBoundingClientRect());
  let delay = 0;
  for (const node of root.querySelectorAll("[data-motion]")) {
    if (before.has(node.dataset.motion)) continue;
    const to = centre(node.getBoundingClientRect());
    node.animate(
      [{ transform: `translate(${from.x - to.x}px, ${from.y - to.y}px) scale(.6)`, opacity: 0.2 }, { transform: "none", opacity: 1 }],
      { ...FLY, delay, fill: "backwards" });
    motion.started += 1;
    delay += 90;
  }
}

/** The cards of ``before`` fly from where they were to ``targets`` (elements, each taking the
 * given number of cards in turn; the last takes the rest), then vanish: a round's sweep. */
export function sweep(before, targets) {
  if (!targets.length || !enabled()) return;
  const cards = [...before.values()];
  let index = 0;
  targets.forEach(({ element, cards: share }, i) => {
    const take = i === targets.length - 1 ? cards.length - index : share;
    const to = centre(element.getBoundingClientRect());
    for (const { rect, copy } of cards.slice(index, index + take)) {
      copy.classList.add("flying");
      Object.assign(copy.style, { position: "fixed", left: `${rect.left}px`, top: `${rect.top}px`, width: `${rect.width}px`, height: `${rect.height}px`, margin: "0", zIndex: "5", pointerEvents: "none" });  // under the panels and the action bar
      copy.removeAttribute("data-motion");
      copy.setAttribute("aria-hidden", "true");
      document.body.append(copy);
      const from = centre(rect);
      const flight = copy.animate(
        [{ transform: "none", opacity: 1 }, { transform: `translate(${to.x - from.x}px, ${to.y - from.y}px) scale(.4)`, opacity: 0.3 }],
        { ...FLY, duration: 650, delay: 150 + 40 * (index % 12), fill: "forwards" });
      motion.started += 1;
      flight.finished.then(() => copy.remove(), () => copy.remove());
      index += 1;
    }
  });
}

const celebrated = new Set(); // keys of the wins already celebrated on this page

/** A game's end, once per ``key`` (a table's game): ``panel`` (the result) is brought into
 * view, and for a ``won`` game marked won while suits burst out from behind it (never over its
 * words: they are drawn under the panel's text). With reduced motion, or a hidden page, no
 * burst. Redraws keep the mark (the renderer passes ``won`` each time). True the first time
 * for ``key`` (the end was just shown). */
export function celebrate(panel, key, won = true) {
  if (!panel) return false;
  if (won) panel.classList.add("won");
  if (celebrated.has(key)) return false;
  celebrated.add(key);
  panel.scrollIntoView({ block: "nearest" });
  if (!won || !enabled()) return true;
  motion.started++;
  const burst = document.createElement("div");
  burst.className = "celebration";
  burst.setAttribute("aria-hidden", "true");
  const suits = ["♠", "♥", "♦", "♣"];
  for (let i = 0; i < 24; i++) {
    const suit = document.createElement("span");
    suit.textContent = suits[i % 4];
    if (i % 4 === 1 || i % 4 === 2) suit.className = "red";
    const angle = (i / 24) * 2 * Math.PI;
    const reach = 140 + ((i * 37) % 90);
    suit.animate([
      { transform: "translate(-50%, -50%) scale(0.4)", opacity: 0 },
      { opacity: 1, offset: 0.2 },
      { transform: `translate(calc(-50% + ${Math.round(Math.cos(angle) * reach * 1.8)}px), calc(-50% + ${Math.round(Math.sin(angle) * reach)}px)) rotate(${(i % 2 ? 1 : -1) * 220}deg) scale(1.1)`, opacity: 0 },
    ], { duration: 1500 + ((i * 53) % 600), delay: (i % 6) * 60, easing: "cubic-bezier(.2,.7,.3,1)", fill: "both" });
    burst.append(suit);
  }
  panel.prepend(burst);
  setTimeout(() => burst.remove(), 2600);
  return true;
}
