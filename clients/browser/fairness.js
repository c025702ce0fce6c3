// The fairness commitment (SHA-256 of the seed, published at the start) and, at the end, the
// revealed seed with a check that it matches.

import { h, short } from "./dom.js";

const checked = new Map();

async function sha256(text) {
  if (!crypto.subtle) return null;
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** A small box with the commitment and the seed (verified in the browser when possible). */
export function fairness(commitment, seed) {
  if (!commitment) return h("div.fairness.muted", "Fairness: the commitment appears when a game starts.");
  const verdict = h("span.verdict");
  if (seed) {
    const key = `${commitment}:${seed}`;
    const show = (ok) => {
      verdict.textContent = ok === null ? "" : ok ? " ✓ matches the commitment" : " ✗ does not match!";
      verdict.className = `verdict ${ok ? "ok" : "bad"}`;
    };
    if (checked.has(key)) show(checked.get(key));
    else sha256(seed).then((digest) => {
      const ok = digest === null ? null : digest === commitment;
      checked.set(key, ok);
      show(ok);
    });
  }
  return h("details.fairness", { dataset: { key: "fairness" } },
    h("summary", "Fairness: commitment ", h("code", { title: commitment }, short(commitment, 16)),
      seed ? h("span.revealed", " · seed revealed") : null),
    h("p", "SHA-256 of the secret seed, published before the first card: ", h("code.full", { id: "commitment" }, commitment)),
    seed
      ? h("p", "Seed: ", h("code.full", { id: "seed" }, seed), verdict)
      : h("p.muted", "The seed is revealed when the game ends."));
}
