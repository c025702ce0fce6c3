// A BlackDrez table's chat: its lines ("Name: text", spectators and bots marked), a field and
// Send (Enter sends), canned lines, mute (on this browser, remembered), follow and block (the
// server's lists, friends.js: a blocked player's lines are hidden as a muted one's, on every
// device), and for the host a way to send a spectator away.
//
// Each table keeps its lines in ``table.chat`` ({seq, event} of its ``said`` events, oldest
// first, one per seq): from the snapshot's ``chat`` (the last 50 lines) and from the updates'
// events. The panel is built once per table and put back into each drawing of the table (its
// field keeps what is typed, its list where it was scrolled), and only new lines are added to
// it: the list is a polite log region, and a line is read out once. Text is always put in as
// text, never as markup.
//
// Lines that arrive out of sight (the panel folded, off screen, or its list scrolled up) are
// counted on the Chat button at the top of the table and on the panel's head.

import { h } from "./dom.js";
import { ask, askText } from "./ask.js";
import { followButtons, isBlocked } from "./friends.js";

const MUTED_KEY = "blackdrez.muted";
const KEEP = 200; // lines kept per table
const MAX_CHARACTERS = 300;
const QUICK = [["good_luck", "Good luck"], ["good_game", "Good game"], ["well_played", "Well played"], ["thanks", "Thanks"]];
const QUICK_TEXT = {
  hello: "Hello!", good_luck: "Good luck!", good_game: "Good game!", well_played: "Well played!", thanks: "Thanks!", oops: "Oops!",
};

const panels = new Map(); // table id -> the chat's panel and its state
const heard = new Map(); // table id -> the last event number whose lines were taken in
const fetched = new Set(); // tables whose earlier lines came (a snapshot) or were asked for

// ------------------------------------------------------------------ muted players

/** The players muted on this browser: player id -> the name they had. */
function mutedPlayers() {
  try {
    const stored = JSON.parse(localStorage.getItem(MUTED_KEY) || "{}");
    return stored && typeof stored === "object" && !Array.isArray(stored) ? stored : {};
  } catch {
    return {};
  }
}

function setMuted(player, name, muted) {
  const all = mutedPlayers();
  if (muted) all[player] = name;
  else delete all[player];
  localStorage.setItem(MUTED_KEY, JSON.stringify(all));
  for (const state of panels.values()) refreshMuted(state);
}

const isMuted = (player) => Object.hasOwn(mutedPlayers(), player);

/** Whether ``player``'s lines are hidden: muted here, or blocked (the server's list). */
const silenced = (player) => isMuted(player) || isBlocked(player);

let chatCtx = null; // the app's (followChat): unblocking from the note under the lines

// ------------------------------------------------------------------ lines in

/** Follow the tables' chat: lines from snapshots and updates into ``table.chat``, and a
 * spectator sent away by the host taken back to the lobby. (app.js calls this once, after its
 * own listener, so a table's state is up to date when its lines are taken in.) */
export function followChat(ctx) {
  chatCtx = ctx;
  ctx.friends.addEventListener("change", () => { for (const state of panels.values()) refreshMuted(state); });
  ctx.conn.addEventListener("message", ({ detail: message }) => {
    if (message.type !== "snapshot" && message.type !== "update") return;
    const table = ctx.store.get(message.table);
    if (!table) return;
    const before = heard.get(table.id) ?? 0;
    let lines;
    if (message.type === "snapshot") {
      fetched.add(table.id);
      lines = (message.chat ?? []).map((n) => ({ ...n, old: true }));
    } else {
      // Events held (a gap asks for a resync first: its events come again, in order). An
      // answer (a resync's) brings history, not news.
      const answer = message.id !== null && message.id !== undefined;
      lines = (message.events ?? []).filter((n) => n.event?.type === "said" && n.seq <= table.seq)
        .map((n) => ({ ...n, old: answer || n.seq <= before }));
    }
    heard.set(table.id, Math.max(before, table.seq));
    if (take(table, lines)) sync(ctx, table);
  });
  ctx.store.addEventListener("event", ({ detail: { table, event } }) => {
    if (event.type === "spectator_removed" && event.player === ctx.me) {
      ctx.toast("The host sent you away from this table.", "info");
      ctx.store.forget(table); // its change takes the page to the lobby
    }
    if (event.type === "spectator_removed") panels.get(table)?.removed.add(event.player);
  });
  ctx.store.addEventListener("change", ({ detail: id }) => {
    if (!ctx.store.get(id)) {
      panels.delete(id);
      heard.delete(id);
      fetched.delete(id);
    }
  });
}

/** Put ``lines`` ({seq, event, old}) in the table's chat, once each, in order; return whether
 * any was new. */
function take(table, lines) {
  table.chat ??= [];
  const held = new Set(table.chat.map((n) => n.seq));
  const fresh = lines.filter((n) => n && n.event?.type === "said" && !held.has(n.seq));
  if (!fresh.length) return false;
  for (const n of fresh) held.add(n.seq);
  table.chat = [...table.chat, ...fresh.map(({ seq, event, old }) => ({ seq, event, old }))]
    .sort((a, b) => a.seq - b.seq).slice(-KEEP);
  return true;
}

// ------------------------------------------------------------------ the panel

/** The Chat button at the top of the table: takes the player to the chat (its field focused),
 * with the number of lines they have not seen. */
export function chatButton(ctx, table) {
  const state = panels.get(table.id);
  const unread = state?.unread ?? 0;
  return h("button.chat-jump", { type: "button", id: "chat-jump", dataset: { key: "chat-jump", table: table.id }, "aria-label": unread ? `Chat: ${unreadWords(unread)}` : "Chat", onclick: () => openChat(ctx, table.id) },
    "Chat", unread ? h("span.unread", { "aria-hidden": "true" }, String(unread)) : null);
}

/** On the action bar (in sight wherever the page is scrolled), only while lines are unread:
 * "Chat: 2 new lines", which takes the player to the chat. */
export function chatPill(ctx, table) {
  const unread = panels.get(table.id)?.unread ?? 0;
  return h("button.chat-pill", { type: "button", hidden: unread === 0, dataset: { key: "chat-pill", table: table.id }, onclick: () => openChat(ctx, table.id) },
    unread ? `Chat: ${unreadWords(unread)}` : "");
}

/** The table's chat panel (the same element at each drawing), its lines brought up to date. */
export function chatPanel(ctx, table) {
  let state = panels.get(table.id);
  if (!state) {
    state = buildPanel(ctx, table.id);
    panels.set(table.id, state);
  }
  // What has the focus in the panel (and where the caret is, if the player is typing): moving
  // the panel into the new drawing loses both.
  const input = state.input;
  const active = document.activeElement;
  state.focused = active && active !== state.panel && state.panel.contains(active) ? active : null;
  state.caret = active === input ? [input.selectionStart, input.selectionEnd, input.selectionDirection] : null;
  sync(ctx, table);
  if (!fetched.has(table.id)) setTimeout(() => fetchLines(ctx, table.id), 0);
  return state.panel;
}

/** The table's earlier lines, once per page, where no snapshot brought them (a seated player's
 * reload resyncs from the last event held): its whole history, or past the events the table
 * keeps a snapshot (with its last 50 lines). (Asked once the first answer is in, so that a
 * snapshot on its way is not asked for again.) */
function fetchLines(ctx, id) {
  const table = ctx.store.get(id);
  if (fetched.has(id) || !table?.seq || table.resyncing) return;
  fetched.add(id);
  ctx.conn.request({ type: "resync", table: id, since: 0 }).catch(() => fetched.delete(id));
}

/** After the table is drawn (the panel put back in the page): the list scrolled as it was. */
export function chatPlaced(id) {
  const state = panels.get(id);
  if (!state) return;
  restoreScroll(state);
  const focused = state.focused;
  const elsewhere = document.activeElement && document.activeElement !== document.body;
  if (focused && !elsewhere && state.panel.contains(focused) && !focused.disabled) {
    focused.focus({ preventScroll: true });
    if (focused === state.input && state.caret?.[0] != null) {
      const [start, end, direction] = state.caret;
      state.input.setSelectionRange(start, end, direction ?? "none");
    }
  }
  state.focused = null;
  state.caret = null;
}

function buildPanel(ctx, id) {
  const list = h("ol.chat-lines", { role: "log", "aria-live": "polite", "aria-label": "Table chat", tabindex: "0" });
  const input = h("input#chat-input", {
    type: "text", maxlength: String(MAX_CHARACTERS), autocomplete: "off", enterkeyhint: "send",
    placeholder: "Write to the table…", "aria-label": "Chat message", dataset: { key: "chat-input" },
  });
  const send = h("button#chat-send", { type: "submit", dataset: { key: "chat-send" } }, "Send");
  const state = {
    id, list, input, send, unread: 0, atBottom: true, scrollTop: 0, sending: null, sendingKey: null,
    shown: new Map(), removed: new Set(), menuFor: null,
  };
  const form = h("form.chat-form", { onsubmit: (e) => { e.preventDefault(); say(ctx, state, input.value, null); } }, input, send);
  state.quick = QUICK.map(([quick, label]) => h("button", { type: "button", dataset: { key: `chat-${quick}` }, onclick: () => say(ctx, state, null, quick) }, label));
  state.quickRow = h("div.chat-quick", { role: "group", "aria-label": "Quick messages" }, state.quick);
  state.closed = h("p.chat-closed", { id: `chat-closed-${id}`, hidden: true });
  state.empty = h("p.chat-empty.muted", "No messages yet: say hello.");
  state.menu = h("div.chat-menu", { id: `chat-menu-${id}`, role: "group", hidden: true });
  state.mutedNote = h("div.chat-muted", { hidden: true });
  state.newer = h("button.chat-newer", { type: "button", hidden: true, onclick: () => { scrollToEnd(state); seen(state); } });
  state.badge = h("span.unread", { hidden: true });
  state.panel = h("details.chat", { open: true, dataset: { key: "chat" }, id: "chat", ontoggle: () => { if (state.panel.open) { scrollToEnd(state); seen(state); } } },
    h("summary", h("span.chat-title", "Chat"), " ", state.badge),
    h("div.chat-body",
      h("div.chat-view", state.empty, list, state.newer),
      state.menu,
      state.mutedNote,
      state.closed,
      form,
      state.quickRow));
  list.addEventListener("scroll", () => {
    state.scrollTop = list.scrollTop;
    state.atBottom = list.scrollTop + list.clientHeight >= list.scrollHeight - 4;
    if (state.atBottom) seen(state);
    else showCount(state);
  });
  state.panel.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !state.menu.hidden) {
      event.preventDefault();
      closeMenu(state, true);
    }
  });
  return state;
}

/** Bring the panel up to date with the table: its new lines, who may write, the muted. */
function sync(ctx, table) {
  const state = panels.get(table.id);
  if (!state) return;
  const me = ctx.me;
  let news = 0;
  let mine = false;
  const lines = table.chat ?? [];
  const keep = new Set(lines.map((n) => n.seq));
  for (const [seq, item] of state.shown) {
    if (!keep.has(seq)) {
      item.remove();
      state.shown.delete(seq);
    }
  }
  for (const numbered of lines) {
    if (state.shown.has(numbered.seq)) continue;
    const item = lineItem(ctx, table.id, state, numbered);
    // In order: before the first line shown that came after it (history arriving late).
    const after = [...state.shown.entries()].find(([seq]) => seq > numbered.seq)?.[1] ?? null;
    state.list.insertBefore(item, after);
    state.shown.set(numbered.seq, item);
    if (numbered.event.player === me) mine = true;
    else if (!numbered.old && !silenced(numbered.event.player)) news += 1;
  }
  state.empty.hidden = state.shown.size > 0;
  writable(ctx, table, state);
  refreshMuted(state);
  if (mine) state.atBottom = true; // one's own line: the newest shows
  if (state.panel.isConnected && state.atBottom) scrollToEnd(state); // (else once placed)
  if (news && !inSight(state)) state.unread += news;
  if (mine) seen(state); // (the list went to its end: what was unread above is in sight)
  else showCount(state);
}

/** One chat line: the author (a menu of what can be done about them, but for one's own
 * lines), marks for a spectator or a bot, and the text. */
function lineItem(ctx, id, state, { seq, event }) {
  const own = event.player === ctx.me;
  const spectator = event.seat === null || event.seat === undefined;
  const name = event.name || "Someone";
  const text = event.text || QUICK_TEXT[event.quick] || "";
  // (a muted player's line is hidden from the start: not read out either)
  return h("li.chat-line", { class: [own ? "own" : "", event.quick ? "quick" : "", spectator ? "spectator" : ""].join(" "), hidden: !own && silenced(event.player), dataset: { seq, player: event.player } },
    own
      ? h("span.chat-name", name)
      : h("button.chat-name", { type: "button", "aria-expanded": "false", "aria-controls": state.menu.id, title: `What to do about ${name}'s lines`, onclick: (e) => openMenu(ctx, id, state, event, e.currentTarget, seq) }, name),
    spectator ? h("span.badge.watching", { title: "Watching this table, not seated" }, "watching") : null,
    event.bot ? h("span.badge.bot", { title: "A bot started by the server" }, "bot") : null,
    h("span.chat-sep", ": "),
    h("span.chat-text", text));
}

/** The menu of one author's line (below the list, out of the log region): mute or unmute,
 * follow and block (not a bot), and for the host, send a spectator away. */
function openMenu(ctx, id, state, event, button, seq) {
  if (state.menuFor === event.player && !state.menu.hidden) {
    closeMenu(state, true);
    return;
  }
  const table = ctx.store.get(id);
  const name = event.name || "this player";
  const muted = isMuted(event.player);
  const seatedNow = table?.info?.seats?.some((s) => s && s.player === event.player);
  const host = table?.info?.host === ctx.me;
  const canRemove = host && (event.seat === null || event.seat === undefined) && !event.bot && !seatedNow && !state.removed.has(event.player);
  for (const other of state.list.querySelectorAll("button.chat-name[aria-expanded=true]")) other.setAttribute("aria-expanded", "false");
  button.setAttribute("aria-expanded", "true");
  state.menuFor = event.player;
  state.menuButton = button;
  state.menu.setAttribute("aria-label", `About ${name}`);
  state.menu.replaceChildren(...[
    h("span.chat-menu-name", name),
    h("button", { type: "button", dataset: { key: "chat-mute" }, onclick: () => { setMuted(event.player, name, !muted); closeMenu(state, false); (state.input.disabled ? state.list : state.input).focus(); } }, muted ? `Unmute ${name}` : `Mute ${name}`),
    ...(event.bot ? [] : followButtons(ctx.friends, event.player, name, () => { closeMenu(state, false); (state.input.disabled ? state.list : state.input).focus(); })),
    canRemove
      ? h("button.danger", { type: "button", dataset: { key: "chat-remove" }, title: "Send this spectator away: they can no longer watch or write here", onclick: () => removeSpectator(ctx, id, state, event) }, `Remove ${name}`)
      : null,
    event.bot ? null : h("button", { type: "button", dataset: { key: "chat-report" }, title: "Show this line to the site's moderators", onclick: () => report(ctx, id, state, event, seq) }, "Report this line"),
    h("button.link", { type: "button", onclick: () => closeMenu(state, true) }, "Close"),
  ].filter(Boolean));
  state.menu.hidden = false;
  state.menu.querySelector("button")?.focus();
}

function closeMenu(state, refocus) {
  state.menu.hidden = true;
  state.menu.replaceChildren();
  state.menuFor = null;
  const button = state.menuButton;
  state.menuButton = null;
  if (button) {
    button.setAttribute("aria-expanded", "false");
    if (refocus && button.isConnected) button.focus();
  }
}

async function removeSpectator(ctx, id, state, event) {
  const name = event.name || "this spectator";
  closeMenu(state, false);
  const yes = await ask({
    title: `Remove ${name} from this table?`,
    text: `${name} stops watching at once and can neither watch this table again nor write in its chat.`,
    yes: `Remove ${name}`, no: "Let them stay", danger: true,
  });
  if (!yes) return;
  const reply = await ctx.send({ type: "remove_spectator", table: id, player: event.player });
  if (reply) state.removed.add(event.player);
}

/** Report one line to the operators, with the reason the player gives (or none). */
async function report(ctx, id, state, event, seq) {
  const name = event.name || "this player";
  closeMenu(state, false);
  const reason = await askText({
    title: `Report ${name}'s line?`,
    text: `“${event.text}” goes to the site's moderators, with the lines before it. Nobody at the table is told.`,
    label: "Why (optional)",
    yes: "Report", no: "Cancel",
  });
  if (reason === null) return;
  const reply = await ctx.send({ type: "report", table: id, seq, reason });
  if (reply) ctx.toast("Reported: the moderators will read it. Mute the player to stop seeing their lines.", "info");
}

/** The muted and blocked players who wrote here: their lines hidden, and a way to unmute or
 * unblock each. */
function refreshMuted(state) {
  const muted = mutedPlayers();
  const hidden = new Map(); // player -> [name, lines hidden]
  for (const item of state.shown.values()) {
    const player = item.dataset.player;
    const off = Object.hasOwn(muted, player) || isBlocked(player);
    item.hidden = off;
    if (off) {
      const [name, n] = hidden.get(player) ?? [muted[player] ?? item.querySelector(".chat-name")?.textContent ?? "", 0];
      hidden.set(player, [name, n + 1]);
    }
  }
  state.mutedNote.hidden = hidden.size === 0;
  // (built again only when it changes: a focused Unmute button stays)
  const signature = JSON.stringify([...hidden.entries()].map(([player, seen]) => [player, seen, isBlocked(player)]));
  if (signature === state.mutedSignature) return;
  state.mutedSignature = signature;
  state.mutedNote.replaceChildren(...[...hidden.entries()].map(([player, [name, n]]) => (isBlocked(player)
    ? h("p",
      `${n === 1 ? "1 line" : `${n} lines`} from ${name} (blocked) `,
      h("button.link", { type: "button", dataset: { key: `chat-unblock-${player}` }, onclick: () => chatCtx.friends.change("unblock", player, name) }, `Unblock ${name}`))
    : h("p",
      `${n === 1 ? "1 line" : `${n} lines`} from ${name} (muted) `,
      h("button.link", { type: "button", dataset: { key: `chat-unmute-${player}` }, onclick: () => setMuted(player, name, false) }, `Unmute ${name}`)))));
}

/** Who may write: the players; spectators where the table lets them. */
function writable(ctx, table, state) {
  const info = table.info;
  let reason = null;
  if (!info || info.status === "closed") reason = "This table is closed: its chat too.";
  else if (table.seat === null && (info.spectator_chat ?? info.options?.spectator_chat) === false) {
    reason = "At this table only the players write in the chat: the host turned spectators' chat off.";
  }
  const off = reason !== null;
  state.input.disabled = off;
  state.send.disabled = off;
  for (const button of state.quick) button.disabled = off;
  state.quickRow.hidden = off;
  state.closed.hidden = !off;
  state.closed.textContent = reason ?? "";
  if (off) state.input.setAttribute("aria-describedby", state.closed.id);
  else state.input.removeAttribute("aria-describedby");
  state.input.placeholder = off ? "Chat closed" : "Write to the table…";
}

// ------------------------------------------------------------------ writing

/** Send a line (or a canned one): after the line still on its way, if any, so that a quick
 * typist's next line is neither lost nor sent before it; the same line sent twice while it is
 * on its way (Enter pressed again) goes once. */
async function say(ctx, state, text, quick) {
  const line = text === null ? null : text.trim();
  if (quick === null && !line) {
    state.input.focus();
    return;
  }
  const key = `${quick}:${line}`;
  if (state.sending && state.sendingKey === key) return;
  const before = state.sending;
  const sent = (async () => {
    if (before) await before.catch(() => {});
    const reply = await ctx.send({ type: "say", table: state.id, text: line, quick }, (error) => sayError(ctx, error));
    if (reply && quick === null && state.input.value.trim() === line) state.input.value = "";
  })();
  state.sending = sent;
  state.sendingKey = key;
  try {
    await sent;
  } finally {
    if (state.sending === sent) {
      state.sending = null;
      state.sendingKey = null;
    }
  }
}

/** A refused line, in words; true when it was one of the chat's own refusals. */
function sayError(ctx, error) {
  const words = {
    rate_limited: () => `Slow down: you can write again in ${Math.max(1, Math.ceil(Number(error.retry_after) || 2))} s.`,
    chat_closed: () => "Spectators cannot write at this table: the host keeps its chat to the players.",
    bad_message: () => `A chat line is 1 to ${MAX_CHARACTERS} characters of text.`,
    not_seated: () => "Only this table's players and spectators can write in its chat.",
    removed: () => "The host sent you away from this table.",
  }[error.code];
  if (!words) return false;
  ctx.toast(words());
  return true;
}

// ------------------------------------------------------------------ seen and unseen

/** Go to the table's chat: unfolded, in view, its newest line shown, the field focused. */
function openChat(ctx, id) {
  const state = panels.get(id);
  if (!state) return;
  state.panel.open = true;
  state.atBottom = true;
  scrollToEnd(state);
  state.panel.scrollIntoView({ block: "end", behavior: "auto" });
  if (!state.input.disabled) state.input.focus({ preventScroll: true });
  else state.list.focus({ preventScroll: true });
  seen(state);
}

function scrollToEnd(state) {
  state.list.scrollTop = state.list.scrollHeight;
  state.scrollTop = state.list.scrollTop;
  state.atBottom = true;
}

function restoreScroll(state) {
  if (state.atBottom) scrollToEnd(state);
  else state.list.scrollTop = state.scrollTop;
}

/** The lines are in sight now: nothing unread. */
function seen(state) {
  if (inSight(state)) state.unread = 0;
  showCount(state);
}

/** Whether the newest lines are in sight: the panel open, its list scrolled to the end, and the
 * list's end on screen, clear of the sticky action bar. */
function inSight(state) {
  if (!state.panel.open || !state.atBottom || !state.list.isConnected || document.visibilityState === "hidden") return false;
  const box = state.list.getBoundingClientRect();
  if (!box.height) return false;
  let bottom = innerHeight;
  const bar = document.querySelector(".action-bar")?.getBoundingClientRect();
  if (bar && bar.top < box.bottom && bar.bottom > box.top) bottom = Math.min(bottom, bar.top);
  return box.bottom > 24 && box.bottom <= bottom + 1;
}

// The page scrolled (or resized): lines counted as new may be in sight now.
let looking = false;
const look = () => {
  if (looking) return;
  looking = true;
  requestAnimationFrame(() => {
    looking = false;
    for (const state of panels.values()) if (state.unread) seen(state);
  });
};
addEventListener("scroll", look, { passive: true });
addEventListener("resize", look, { passive: true });
document.addEventListener("visibilitychange", look);

function unreadWords(n) {
  return n === 1 ? "1 new line" : `${n} new lines`;
}

/** Show the number of unseen lines: on the panel's head, below a list scrolled up, and on the
 * Chat button at the top of the table. */
function showCount(state) {
  const n = state.unread;
  state.badge.hidden = n === 0;
  state.badge.textContent = n ? unreadWords(n) : "";
  state.newer.hidden = n === 0 || state.atBottom;
  state.newer.textContent = n ? `↓ ${unreadWords(n)}` : "";
  const pill = document.querySelector(`.chat-pill[data-table="${CSS.escape(state.id)}"]`);
  if (pill) {
    pill.hidden = n === 0;
    pill.textContent = n ? `Chat: ${unreadWords(n)}` : "";
  }
  const jump = document.querySelector(`#chat-jump[data-table="${CSS.escape(state.id)}"]`);
  if (jump) {
    jump.setAttribute("aria-label", n ? `Chat: ${unreadWords(n)}` : "Chat");
    let count = jump.querySelector(".unread");
    if (n && !count) {
      count = h("span.unread", { "aria-hidden": "true" });
      jump.append(count);
    }
    if (n) count.textContent = String(n);
    else count?.remove();
  }
}
