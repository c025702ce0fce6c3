// Friends (protocol: follow, unfollow, block, unblock, friends, challenge, answer_challenge;
// pushed: challenged, challenge_answered, and match_found for an accepted challenge).
//
// Theory of operation. The server holds whom the player follows and blocks: this module asks it
// (`friends`) after each welcome, after each change, and every REFRESH ms while the lobby's
// Friends panel is on screen, and keeps the answer. The blocked players are the server's list,
// so they hold on every device: chat.js hides their lines as it hides the muted (`isBlocked`).
// Following and blocking are offered where players appear (a profile page, a chat line's menu)
// through `followButtons`.
// A challenge received is a card at the top of the page (before the screen in the tab order,
// said in the live region) that stays until answered or lapsed, with its countdown; one sent is
// remembered until it is answered: a decline is said, an acceptance brings `match_found`, which
// the lobby hands here (`expects`), and the table opens as find.js opens a matched one.

import { h, swap } from "./dom.js";
import { OPEN_AFTER } from "./find.js";

const CHALLENGE_SECONDS = 60; // protocol v1 CHALLENGE_SECONDS: how long a challenge may be answered

const REFRESH = 20000; // ms between two `friends` while the lobby shows the panel
const STATUS_WORDS = { online: "Online", playing: "Playing", watching: "Watching", offline: "Offline" };

let blockedNow = new Map(); // player id -> name: the server's last `friends.blocked`

/** Whether the server's list says the player blocks ``player`` (their chat lines are hidden). */
export const isBlocked = (player) => blockedNow.has(player);

export class Friends extends EventTarget {
  constructor(ctx) {
    super();
    this.ctx = ctx;
    this.following = [];
    this.blocked = [];
    this.loaded = false;
    this.sent = new Map(); // challenge id -> {player, name, expires}: waiting for an answer
    this.received = new Map(); // challenge id -> {message, card, left}
    this.accepted = null; // {name, until}: a challenge accepted, its match_found awaited
    this.body = null;
    this.box = h("div#challenges.challenges", { role: "region", "aria-label": "Challenges" });
    document.querySelector("header.top").after(this.box);
    setInterval(() => { if (this.body?.isConnected) this.refresh(); }, REFRESH);
    setInterval(() => this.tick(), 1000);
  }

  /** After each welcome: the lists again (another identity, or changed on another device). */
  welcomed() { this.refresh(); }

  async refresh() {
    if (!this.ctx.conn.connected) return;
    const reply = await this.ctx.send({ type: "friends" }, () => true);
    if (!reply) return;
    this.following = reply.following;
    this.blocked = reply.blocked;
    this.loaded = true;
    blockedNow = new Map(reply.blocked.map((f) => [f.player, f.name]));
    this.render();
    this.dispatchEvent(new Event("change"));
  }

  follows(player) { return this.following.some((f) => f.player === player); }
  blocks(player) { return blockedNow.has(player); }

  /** follow, unfollow, block or unblock ``player`` (called ``name``), said in a toast. */
  async change(type, player, name) {
    const reply = await this.ctx.send({ type, player }, (error) => {
      if (error.code !== "not_found") return false;
      this.ctx.toast(`${name} has not been seen on this server: nobody to follow.`);
      return true;
    });
    if (!reply) return;
    const words = {
      follow: `You follow ${name}: they show in the lobby's Friends panel.`,
      unfollow: `You no longer follow ${name}.`,
      block: `${name} is blocked: their challenges are refused and their chat lines hidden.`,
      unblock: `${name} is no longer blocked.`,
    }[type];
    this.ctx.toast(words, "info");
    this.ctx.announce(words);
    await this.refresh();
  }

  // ---------------------------------------------------------------- challenges
  async challenge(player, name, rated) {
    const kind = rated ? "rated" : "casual";
    const reply = await this.ctx.send({ type: "challenge", player, rated }, (error) => {
      const words = {
        challenge_refused: () => `${name} does not take your challenges.`,
        not_found: () => `${name} is not connected.`,
        rate_limited: () => `Too many challenges at once: you can challenge again in ${Math.max(1, Math.ceil(Number(error.retry_after) || 10))} s.`,
      }[error.code];
      if (!words) return false;
      this.ctx.toast(words());
      this.ctx.announce(words());
      return true;
    });
    if (!reply) return;
    this.sent.set(reply.challenge, { player, name, expires: reply.expires });
    const words = `Challenge sent to ${name}… (a ${kind} game; waiting for their answer)`;
    this.ctx.toast(words, "info", `challenge-${reply.challenge}`);
    this.ctx.announce(words);
  }

  receive(message) {
    if (message.type === "challenged") this.challenged(message);
    else if (message.type === "challenge_answered") {
      const sent = this.sent.get(message.challenge);
      this.sent.delete(message.challenge);
      if (!sent || message.accepted) return; // (accepted: match_found opens the table)
      const words = this.ctx.conn.serverNow() >= sent.expires - 1
        ? `${sent.name} did not answer your challenge.` : `${sent.name} declined your challenge.`;
      this.ctx.toast(words, "info", `challenge-${message.challenge}`);
      this.ctx.announce(words);
    }
  }

  challenged(message) {
    if (this.received.has(message.challenge)) return;
    const text = `${message.name} challenges you to a ${message.rated ? "rated" : "casual"} game`;
    const id = `challenge-${message.challenge}`;
    const left = h("span.challenge-left", { "aria-hidden": "true" });
    const card = h("div.challenge-card", { role: "group", "aria-labelledby": `${id}-text`, dataset: { challenge: message.challenge } },
      h("p.challenge-text", { id: `${id}-text` }, h("strong", text), " ", left),
      h("div.buttons",
        h("button.primary", { type: "button", onclick: () => this.answer(message.challenge, true) }, "Accept"),
        h("button", { type: "button", onclick: () => this.answer(message.challenge, false) }, "Decline"),
        h("a", { href: `#/player/${encodeURIComponent(message.player)}` }, `${message.name}'s profile`)));
    this.received.set(message.challenge, { message, card, left });
    this.box.append(card);
    this.tick();
    this.ctx.announce(`${text}. Accept or Decline at the top of the page.`);
    if (!document.activeElement || document.activeElement === document.body) card.querySelector("button").focus();
  }

  async answer(challenge, accept) {
    const held = this.received.get(challenge);
    if (!held) return;
    for (const button of held.card.querySelectorAll("button")) button.disabled = true;
    // (expected before the reply: match_found may come first)
    if (accept) this.accepted = { name: held.message.name, until: Date.now() + 30000 };
    const reply = await this.ctx.send({ type: "answer_challenge", challenge, accept }, (error) => {
      if (error.code !== "not_found") return false;
      this.ctx.toast(`${held.message.name}'s challenge is no longer open.`, "info");
      return true;
    });
    this.dropCard(challenge);
    if (!reply) {
      this.accepted = null;
      return;
    }
    if (!accept) this.ctx.toast(`You declined ${held.message.name}'s challenge.`, "info");
  }

  dropCard(challenge) {
    const held = this.received.get(challenge);
    if (!held) return;
    const focused = held.card.contains(document.activeElement);
    held.card.remove();
    this.received.delete(challenge);
    if (focused) document.getElementById("screen").focus({ preventScroll: true });
  }

  /** Each second: the cards' countdowns; a lapsed challenge is taken away. */
  tick() {
    const now = this.ctx.conn.serverNow();
    for (const [challenge, { message, left }] of this.received) {
      // (clamped: the server's clock read a moment ago can put the expiry a hair past 60 s)
      const seconds = Math.min(CHALLENGE_SECONDS, Math.ceil(message.expires - now));
      if (seconds <= 0) {
        this.dropCard(challenge);
        this.ctx.toast(`${message.name}'s challenge lapsed.`, "info");
        continue;
      }
      left.textContent = `${seconds} s left`;
    }
  }

  /** Whether ``match`` (a `match_found`) is a challenge's table: one accepted here, or one
   * sent to a player now at that table. */
  expects(match) {
    if (match.arena) return false;
    if (this.accepted && this.accepted.until > Date.now() && match.players.includes(this.accepted.name)) return true;
    return [...this.sent.values()].some((s) => match.players.includes(s.name));
  }

  /** A challenge's table is made: said, then joined (as find.js does). */
  found(match) {
    const other = match.players.find((_, seat) => seat !== match.seat) ?? "your opponent";
    for (const [id, sent] of this.sent) if (sent.name === other) this.sent.delete(id);
    this.accepted = null;
    const words = `Challenge on: you and ${other}, the game starts.`;
    this.ctx.toast(words, "info");
    this.ctx.announce(words);
    setTimeout(async () => {
      const reply = await this.ctx.send({ type: "join", table: match.table });
      if (reply) this.ctx.open(reply.table.id, "seat");
    }, OPEN_AFTER);
  }

  // ---------------------------------------------------------------- drawing
  /** The lobby's Friends panel (built with the lobby, once per visit). */
  panel() {
    this.body = h("div.friends-body");
    this.render();
    this.refresh();
    return h("section.panel.friends-panel", { "aria-labelledby": "friends-title" },
      h("h2#friends-title", "Friends"),
      this.body);
  }

  render() {
    if (!this.body) return;
    if (!this.loaded) {
      swap(this.body, h("p.empty", "Looking for your friends…"));
      return;
    }
    swap(this.body,
      this.following.length
        ? h("ul.friends", this.following.map((f) => this.row(f)))
        : h("p.empty", "You follow nobody yet. To follow a player, press their name in a table's chat, or open their profile page (from the ratings or a game's record), and press Follow."),
      this.blocked.length
        ? h("div.blocked",
          h("h3", "Blocked"),
          h("ul.friends", this.blocked.map((f) => h("li.friend-row.blocked-row", { dataset: { player: f.player } },
            h("a.friend-name", { href: `#/player/${encodeURIComponent(f.player)}` }, f.name),
            h("button.link", { type: "button", dataset: { key: `unblock-${f.player}` }, "aria-label": `Unblock ${f.name}`, onclick: () => this.change("unblock", f.player, f.name) }, "Unblock")))))
        : null);
  }

  row(f) {
    const status = STATUS_WORDS[f.status] ? f.status : "offline";
    const free = status !== "offline"; // (one at a table may be between games: they choose)
    const rated = h("input", { type: "checkbox", "aria-label": `Rated challenge to ${f.name}`, dataset: { key: `rated-${f.player}` } });
    return h("li.friend-row", { dataset: { player: f.player, status } },
      h("span.friend-who",
        h("span.friend-dot", { dataset: { status }, "aria-hidden": "true" }),
        h("a.friend-name", { href: `#/player/${encodeURIComponent(f.player)}` }, f.name),
        h("span.friend-status", { dataset: { status } }, STATUS_WORDS[status]),
        f.table && status !== "offline"
          ? h("a.friend-watch", { href: `#/table/${encodeURIComponent(f.table)}`, "aria-label": `Watch ${f.name}'s table` }, "Watch")
          : null),
      h("span.buttons",
        free ? h("label.check.friend-rated", rated, " rated") : null,
        free ? h("button.primary", { type: "button", dataset: { key: `challenge-${f.player}` }, "aria-label": `Challenge ${f.name}`, onclick: () => this.challenge(f.player, f.name, rated.checked) }, "Challenge") : null,
        h("button.link", { type: "button", dataset: { key: `unfollow-${f.player}` }, "aria-label": `Unfollow ${f.name}`, onclick: () => this.change("unfollow", f.player, f.name) }, "Unfollow")));
  }
}

/** Follow / Unfollow and Block / Unblock buttons for ``player`` (called ``name``), for a profile
 * page or a chat line's menu; ``after`` runs once a change is made (the caller redraws). */
export function followButtons(friends, player, name, after = () => {}) {
  const following = friends.follows(player);
  const blocked = friends.blocks(player);
  const act = (type) => async () => {
    await friends.change(type, player, name);
    after();
  };
  return [
    blocked ? null : h("button", { type: "button", dataset: { key: "follow" }, onclick: act(following ? "unfollow" : "follow") }, following ? `Unfollow ${name}` : `Follow ${name}`),
    h("button", { type: "button", class: blocked ? "" : "danger", dataset: { key: "block" }, title: blocked ? null : "Refuse their challenges and hide their chat lines, on every device", onclick: act(blocked ? "unblock" : "block") }, blocked ? `Unblock ${name}` : `Block ${name}`),
  ].filter(Boolean);
}
