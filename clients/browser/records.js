// The pages about players who come back, read from the records API (/api/v1/, docs/api.md):
// sign in or up (#/account), a player's profile with rating and history (#/player/ID), the
// BlackDrez ratings (#/ratings), and the replay viewer of a finished game (#/game/ID), a link
// anyone can share. Another player's profile offers Follow and Block (friends.js). Accounts go over the WebSocket (sign_up, sign_in, sign_out_everywhere); the
// rest are plain GETs. The replay viewer draws the steps the server replayed from the record, as
// the table's spectators saw them: no rules here.

import { h, short, swap } from "./dom.js";
import { cardBack, pokerCard, standardCard } from "./cards.js";
import { count, describeEvent, errorText } from "./words.js";
import { changeTag, ratingText, ratingTitle, signedChange } from "./rating.js";
import { isAccount, storedToken } from "./net.js";
import { viewFields } from "./generic.js";
import { followButtons } from "./friends.js";

const GAME_NAMES = { blackdrez: "BlackDrez", blackjack_piles: "Blackjack Piles", blue_jacket: "Blue Jacket" };
const ROUTES = [
  [/^#\/account$/, () => ({ page: "account" })],
  [/^#\/ratings$/, () => ({ page: "ratings" })],
  [/^#\/player\/([^/]+)$/, (m) => ({ page: "player", id: decodeURIComponent(m[1]) })],
  [/^#\/game\/([^/]+)$/, (m) => ({ page: "game", id: decodeURIComponent(m[1]) })],
];
const ACCOUNT_ERRORS = {
  bad_login: "Wrong name or password.",
  bad_name: "That name cannot be used: 1 to 24 printable characters.",
  weak_password: "A password is 8 to 1024 characters.",
  name_taken: "Another player already claimed that name.",
  already_claimed: "This identity already has a password.",
  bad_token: "Sign in first.",
  rate_limited: "Too many attempts: wait a minute and try again.",
  unavailable: "Accounts are not available on this server right now.",
};

/** The records page ``location.hash`` names, or null (then the lobby or a table is shown). */
export function recordsRoute(hash = location.hash) {
  for (const [pattern, make] of ROUTES) {
    const found = pattern.exec(hash);
    if (found) return make(found);
  }
  return null;
}

/** GET ``/api/v1/<path>`` as this browser's player (its token: a private table's games are
 * served to their players only), or as anyone once the server refuses the token (the
 * connection deals with a refused token; the page still shows what anyone may see). */
async function apiResponse(path) {
  const token = storedToken();
  if (token) {
    const response = await fetch(`/api/v1/${path}`, { headers: { Authorization: `Bearer ${token}` } });
    if (response.status !== 401) return response;
  }
  return fetch(`/api/v1/${path}`);
}

export async function api(path) {
  const response = await apiResponse(path);
  const body = await response.json().catch(() => null);
  if (!response.ok) throw Object.assign(new Error(body?.error?.message ?? response.statusText), { code: body?.error?.code, status: response.status });
  return body;
}

const PRIVATE_TITLE = "Played at a private table: only its players can see this game";

function privateBadge(game) {
  return game.private ? h("span.badge.private", { title: PRIVATE_TITLE }, "private") : null;
}

/** Save the record of a private game: a plain link would fetch it without the token. */
async function downloadRecord(event, replay) {
  event.preventDefault();
  const name = event.currentTarget.getAttribute("download");
  const response = await apiResponse(`games/${encodeURIComponent(replay.id)}`);
  if (!response.ok) return;
  const link = h("a", { href: URL.createObjectURL(await response.blob()), download: name });
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 1000);
}

function when(seconds) {
  return new Date(seconds * 1000).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

function rating(r) {
  return r ? ratingText(r) : "unrated";
}

/** A game's page: ids are letters, digits and ``_ . : -`` (safe in a URL as they are). */
function gameHref(id) {
  return `#/game/${id}`;
}

function playerLink(p) {
  return h("a", { href: `#/player/${encodeURIComponent(p.player)}` }, p.name, p.bot ? h("span.badge.bot", "bot") : null);
}

let mounted = null; // the hash whose page is on screen (a re-render keeps it: see show())

/** Show the records page of ``route`` (see recordsRoute) in ``screen``. */
export function renderRecords(ctx, route, screen) {
  const key = `${location.hash}|${ctx.conn.welcome?.player ?? ""}`;
  if (mounted === key && screen.querySelector(".records")) return;
  mounted = key;
  delete screen.dataset.game;
  ctx.shortcuts = {};
  const page = h("div.records", { dataset: { page: route.page } }, h("p.loading", "Loading…"));
  swap(screen, page);
  const pages = { account: accountPage, ratings: ratingsPage, player: playerPage, game: replayPage };
  pages[route.page](ctx, route, page).catch((error) => {
    const own = route.page === "player" && route.id === ctx.conn.welcome?.player;
    if (own && error.status === 404) { // a player's own page before their first finished game
      swap(page, h("section.panel", h("h2", "Your games"),
        h("p", "Your finished games show here, with your scores and, at rated tables, your rating. Finish a game (a solitaire takes a few minutes) and come back."),
        h("p", h("a", { href: "#", onclick: (e) => { e.preventDefault(); ctx.lobby(); } }, "Back to the lobby"))));
      return;
    }
    if (route.page === "player" && error.status === 404 && ctx.conn.welcome) { // no finished game yet
      const name = knownName(ctx, route.id);
      swap(page, h("section.panel.profile", h("div.panel-head", h("h2", name ?? "A player"), followBar(ctx, route.id, name ?? "this player")),
        h("p.muted", "No finished games yet: their games and rating show here once they finish one.")));
      return;
    }
    swap(page, h("section.panel", h("h2", "Not found"),
      h("p", error.status === 404 ? error.message : "The records cannot be read just now: try again."),
      h("p", h("a", { href: "#" , onclick: (e) => { e.preventDefault(); ctx.lobby(); } }, "Back to the lobby"))));
  });
}

/** Forget the mounted page (after signing in or out: the same hash shows something else). */
export function remountRecords() { mounted = null; }

// ------------------------------------------------------------------ account
async function accountPage(ctx, route, page) {
  const conn = ctx.conn;
  const welcome = conn.welcome;
  const claimed = conn.token && isAccount(conn.token);
  // Each form says its own outcome under its own button (a refused sign-in was said under the
  // sign-up column, where nobody looked).
  const statusLine = (id) => h("p.form-status", { id, role: "status", "aria-live": "polite" });
  const inStatus = statusLine("sign-in-status");
  const upStatus = statusLine("sign-up-status");
  const outStatus = statusLine("sign-out-status");
  const say = (status, text, ok) => { status.textContent = text; status.className = `form-status ${ok ? "ok" : "bad"}`; };
  const fail = (status) => (error) => say(status, ACCOUNT_ERRORS[error.code] ?? errorText(error), false);
  const busy = (form, on) => { for (const b of form.querySelectorAll("button")) b.disabled = on; };
  const field = (label, input) => h("label.field", h("span", label), input);

  const signIn = h("form#sign-in", { "aria-labelledby": "sign-in-title", onsubmit: async (e) => {
    e.preventDefault();
    const f = e.target.elements;
    busy(e.target, true);
    try {
      const session = await conn.request({ type: "sign_in", name: f.name.value, password: f.password.value });
      say(inStatus, `Signed in as ${session.name}.`, true);
      remountRecords();
      ctx.become(session);
      location.hash = `#/player/${encodeURIComponent(session.player)}`;
    } catch (error) { fail(inStatus)(error); } finally { busy(e.target, false); }
  } },
  h("h2#sign-in-title", "Sign in"),
  h("p.muted", "Play as your account on this browser: your name, games and rating."),
  field("Name", h("input", { name: "name", required: true, maxlength: "24", autocomplete: "username" })),
  field("Password", h("input", { name: "password", type: "password", required: true, minlength: "8", autocomplete: "current-password" })),
  h("button.primary", { type: "submit" }, "Sign in"),
  inStatus);

  const signUp = h("form#sign-up", { "aria-labelledby": "sign-up-title", onsubmit: async (e) => {
    e.preventDefault();
    const f = e.target.elements;
    busy(e.target, true);
    try {
      const session = await conn.request({ type: "sign_up", name: f.name.value, password: f.password.value });
      ctx.keep(session);
      say(upStatus, `Your identity is yours now, ${session.name}: sign in with this name on any browser.`, true);
      remountRecords();
      location.hash = `#/player/${encodeURIComponent(session.player)}`;
    } catch (error) { fail(upStatus)(error); } finally { busy(e.target, false); }
  } },
  h("h2#sign-up-title", "Keep this identity"),
  h("p.muted", `You play as the guest ${welcome?.name ?? ""}. Choose a name and a password to keep your games and rating, and to play as yourself on another browser.`),
  field("Name", h("input", { name: "name", required: true, maxlength: "24", value: welcome?.name ?? "", autocomplete: "username" })),
  field("Password (8 characters or more)", h("input", { name: "password", type: "password", required: true, minlength: "8", autocomplete: "new-password" })),
  h("button.primary", { type: "submit" }, "Sign up"),
  upStatus);

  const signedIn = h("section.panel",
    h("h2", `Signed in as ${welcome?.name ?? ""}`),
    h("p", h("a", { href: `#/player/${encodeURIComponent(welcome?.player ?? "")}` }, "Your profile")),
    h("p.muted", "Signed in on a browser you do not trust any more? Sign out everywhere: every other browser loses this identity."),
    h("div.buttons",
      h("button", { id: "sign-out-everywhere", onclick: async () => {
        try {
          const session = await conn.request({ type: "sign_out_everywhere" });
          ctx.keep(session);
          say(outStatus, "Signed out everywhere else.", true);
        } catch (error) { fail(outStatus)(error); }
      } }, "Sign out everywhere"),
      h("button", { id: "sign-out", onclick: () => { remountRecords(); ctx.signOut(); } }, "Sign out of this browser")),
    outStatus);

  swap(page, h("div.account-grid",
    claimed ? signedIn : h("section.panel", signUp),
    h("section.panel", signIn)));
}

// ------------------------------------------------------------------ ratings
async function ratingsPage(ctx, route, page) {
  const kinds = [["all", "Everyone"], ["humans", "Humans"], ["bots", "Bots"]];
  const boards = await Promise.all(kinds.map(([kind]) => api(`leaderboards/blackdrez?kind=${kind}&limit=50`)));
  const table = (board) => board.entries.length
    ? h("table.rec-board",
      h("thead", h("tr", h("th", "#"), h("th", "Player"), h("th", "Rating"), h("th", "Rated games"))),
      h("tbody", board.entries.map((e, i) => h("tr", h("td", String(i + 1)), h("td", playerLink(e)),
        h("td", { title: e.rating ? ratingTitle(e.rating) : null }, rating(e.rating)), h("td", String(e.rating?.games ?? 0))))))
    : h("p.muted", "No rated games yet.");
  swap(page, h("section.panel.ratings",
    h("h2", "BlackDrez ratings"),
    h("p.muted", "Rated tables only (the host chooses). Everyone starts at 1500; each rated game moves the rating by how surprising its result was, more while it is new. “?” marks a provisional rating: fewer than 10 rated games. Bots play the ladder and are always labelled."),
    h("p.muted", { title: "The Weng-Lin (openskill) estimate μ − 3σ, shown as 1500 + 20 × (μ − 3σ)" }, "The rating is a cautious estimate: it also rises as the system becomes sure of you, so regular players tend to climb."),
    h("div.boards-grid", kinds.map(([, label], i) => h("div", h("h3", label), table(boards[i]))))));
}

// ------------------------------------------------------------------ profile
const SVG = "http://www.w3.org/2000/svg";

/** An SVG element: ``attrs`` are attributes (``style``: an object, set through the CSSOM, which
 * the Content-Security-Policy allows), then children (elements or text). */
function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined) continue;
    if (key === "style") for (const [name, v] of Object.entries(value)) node.style.setProperty(name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`), v);
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

/** Round ticks (steps of 1, 2 or 5 × 10ⁿ) covering ``min`` to ``max``: 3 to 7 of them. */
function niceTicks(min, max) {
  let lo = min;
  let hi = max;
  if (hi - lo < 20) { const mid = (lo + hi) / 2; lo = mid - 10; hi = mid + 10; }
  const raw = (hi - lo) / 4;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((k) => k * magnitude).find((k) => k >= raw);
  const ticks = [];
  for (let v = Math.floor(lo / step) * step; v <= Math.ceil(hi / step) * step + step / 2; v += step) ticks.push(Math.round(v));
  return ticks;
}

function day(seconds) {
  return new Date(seconds * 1000).toLocaleDateString(undefined, { day: "numeric", month: "short" });
}

/** "Dec 1, 9:14 PM" (the year too when it is not this one): short enough for a phone's line. */
function shortWhen(seconds) {
  const date = new Date(seconds * 1000);
  const year = date.getFullYear() === new Date().getFullYear() ? undefined : "numeric";
  return date.toLocaleString(undefined, { year, month: "short", day: "numeric", hour: "numeric", minute: "2-digit" });
}

function clock(seconds) {
  return new Date(seconds * 1000).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
}

/** The rating after each of ``points`` (newest first, two or more) as a line chart with axes:
 * the shown rating up the side, the rated games (oldest to newest, dated) along the bottom.
 * ``width``: the room it has, in CSS pixels (it is drawn at that size, and shrinks with it). */
function ratingChart(points, width, more) {
  const series = points.slice().reverse();
  const values = series.map((p) => p.display);
  const n = values.length;
  const W = Math.round(Math.max(260, Math.min(900, width)));
  const narrow = W < 440;
  const H = narrow ? 220 : 250;
  const m = { left: 46, right: 16, top: 34, bottom: 46 };
  const ticks = niceTicks(Math.min(...values), Math.max(...values));
  const lo = ticks[0];
  const hi = ticks[ticks.length - 1];
  const inner = { left: m.left + 12, right: W - m.right - 8 };
  const base = H - m.bottom;
  const x = (i) => inner.left + (i * (inner.right - inner.left)) / (n - 1);
  const y = (v) => base - ((v - lo) * (base - m.top)) / (hi - lo);
  const muted = { fill: "var(--muted)", fontVariantNumeric: "tabular-nums" };
  const axis = { stroke: "var(--muted)", strokeWidth: "1" };
  const first = values[0];
  const last = values[n - 1];
  const label = `BlackDrez rating after each of the last ${n} rated games: from ${first} to ${last} (highest ${Math.max(...values)}, lowest ${Math.min(...values)})`;

  const yAxis = svg("g", { class: "y-axis" },
    ticks.map((v) => svg("g", { class: "tick" },
      svg("line", { x1: m.left, x2: W - m.right, y1: y(v), y2: y(v), style: { stroke: "var(--line)", strokeWidth: "1" } }),
      svg("text", { x: m.left - 6, y: y(v), "text-anchor": "end", "dominant-baseline": "middle", "font-size": 12, style: muted }, String(v)))),
    svg("line", { x1: m.left, x2: m.left, y1: m.top - 6, y2: base, style: axis }),
    svg("text", { class: "axis-title", x: 4, y: m.top - 16, "font-size": 12, "font-weight": 600, style: { fill: "var(--ink)" } }, "Rating"));

  // Dates under the first and the last game (and the middle one when there is room); a mark
  // on the axis under every game
  const labelled = [0, n - 1];
  if (n >= 5 && !narrow) labelled.splice(1, 0, Math.floor((n - 1) / 2));
  const sameDay = day(series[0].at) === day(series[n - 1].at);
  const when = (p) => (sameDay ? clock(p.at) : day(p.at));
  const anchors = (i) => (i === 0 ? "start" : i === n - 1 ? "end" : "middle");
  const xAxis = svg("g", { class: "x-axis" },
    svg("line", { x1: m.left, x2: W - m.right, y1: base, y2: base, style: axis }),
    series.map((p, i) => svg("line", { x1: x(i), x2: x(i), y1: base, y2: base + 4, style: axis })),
    labelled.map((i) => svg("g", { class: "tick" },
      svg("text", { x: x(i), y: base + 18, "text-anchor": anchors(i), "font-size": 12, style: muted }, when(series[i])))),
    svg("text", { class: "axis-title", x: (m.left + W - m.right) / 2, y: H - 6, "text-anchor": "middle", "font-size": 12, style: muted },
      `Rated games, oldest to newest${more ? ` (the last ${n})` : ""}`));

  const line = svg("polyline", {
    class: "line",
    points: values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" "),
    style: { fill: "none", stroke: "var(--accent-text)", strokeWidth: "2.5", strokeLinejoin: "round", strokeLinecap: "round" },
  });
  const dots = series.map((p, i) => svg("circle", {
    class: "point", cx: x(i).toFixed(1), cy: y(p.display).toFixed(1), r: narrow ? 3.5 : 4,
    style: { fill: "var(--accent-text)", stroke: "var(--panel)", strokeWidth: "1.5" },
  }, svg("title", `${when(p)}${sameDay ? "" : `, ${clock(p.at)}`} · place ${p.place} · ${p.display_before} → ${p.display} (${signedChange(p.change)})`)));
  const now = svg("text", {
    class: "last-value", x: x(n - 1), y: y(last) - 10, "text-anchor": "end", "font-size": 13, "font-weight": 700,
    style: { fill: "var(--accent-text)", fontVariantNumeric: "tabular-nums" },
  }, String(last));

  return svg("svg", {
    class: "rating-chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label,
    style: { display: "block", width: "100%", maxWidth: `${W}px`, height: "auto", overflow: "visible" },
  }, svg("title", label), yAxis, xAxis, line, dots, now);
}

/** The profile's rating: the chart (from two rated games on), each game's change, newest first. */
function ratingPanel(profile, stat, width) {
  const points = profile.ratings;
  if (!points.length && !stat?.rating) return null;
  const history = points.slice(0, 10);
  return h("section.panel.rating-panel", { "aria-labelledby": "rating-panel-title" },
    h("h2#rating-panel-title", "BlackDrez rating",
      stat?.rating ? h("strong.rating", { title: ratingTitle(stat.rating), style: { color: "var(--accent-text)" } }, rating(stat.rating)) : null),
    points.length >= 2
      ? ratingChart(points, width, Boolean(profile.ratings_next))
      : h("p.chart-empty.muted", points.length === 1 ? "1 rated game so far: the chart starts after two." : "No rated game to show yet: the chart starts after two."),
    history.length ? h("h3", { style: { margin: "0", fontSize: "1rem" } }, "Each rated game’s change") : null,
    history.length ? h("ol.rating-history", history.map((r) => h("li", { dataset: { game: r.game_id } },
      h("span", { style: { whiteSpace: "nowrap" } }, // the change reads whole; the date may wrap
        h("a", { href: gameHref(r.game_id) }, `place ${r.place}`), ` ${r.display_before} → ${r.display} `, changeTag(r.change)),
      h("span.muted.when", { style: { whiteSpace: "nowrap" } }, shortWhen(r.at))))) : null);
}

/** Why a solitaire's best score is below a score in the list: that game had help or was not
 * ranked (only ranked games played without help make a best score; docs/api.md). */
const UNRANKED_WHY = "hints, undos, a numbered deal or a second try at the daily deal";

function bestScoreNote(stat, games, player) {
  const scores = games.filter((g) => g.game === stat.game)
    .map((g) => g.players.find((p) => p.player === player)?.score)
    .filter((score) => typeof score === "number");
  const higher = Math.max(-Infinity, ...scores.filter((score) => stat.best_score === null || score > stat.best_score));
  if (higher === -Infinity) return null;
  return h("p.why-best.muted", { style: { fontSize: "0.85rem" } }, stat.best_score !== null
    ? `${stat.best_score} without help · ${higher} with help or not ranked (below): ${UNRANKED_WHY} count as games, not as bests.`
    : `No best score yet: ${higher} below was with help or not ranked; ${UNRANKED_WHY} count as games, not as bests.`);
}

/** Why a game counted here is not in the list: a daily deal's game is listed once its UTC day
 * has ended (its record holds the day's secret seed until then). */
function unlistedNote(stat) {
  if (!stat.sealed) return null;
  const until = new Date(stat.sealed_until * 1000);
  const today = until.toDateString() === new Date().toDateString();
  const at = `${clock(stat.sealed_until)} your time${today ? "" : `, ${until.toLocaleDateString(undefined, { weekday: "short", day: "numeric", month: "short" })}`}`;
  return h("p.why-unlisted.muted", { style: { fontSize: "0.85rem" } }, stat.sealed === 1
    ? `Today’s daily deal is counted here already; it shows in the list once the day ends (UTC), at ${at}.`
    : `${stat.sealed} daily deals’ games are counted here already; they show in the list once the day ends (UTC), at ${at}.`);
}

function statCard(s, profile) {
  const p = profile.player;
  return h("div.rec-stat", { dataset: { game: s.game } },
    h("h3", GAME_NAMES[s.game] ?? s.game),
    s.rating
      ? h("p.big", "Rating ", h("strong.rating", { title: ratingTitle(s.rating) }, rating(s.rating)))
      : s.best_score !== null ? h("p.big", { title: `The best ranked game played without help (no ${UNRANKED_WHY})` }, "Best score ", h("strong", String(s.best_score))) : null,
    s.rating ? null : bestScoreNote(s, profile.games, p.id),
    h("p", s.rating ? `${count(s.games, "game")} (${s.rating.games} rated), ${count(s.wins, "win")}` : `${count(s.games, "game")}, ${count(s.wins, "win")}`),
    unlistedNote(s),
    h("p.muted", `Last played ${when(s.last_played)}`));
}

function gameRow(game, player, stats) {
  const me = game.players.find((p) => p.player === player);
  const stat = stats.find((s) => s.game === game.game);
  // A solitaire's score above the best: that game had help or was not ranked (see bestScoreNote)
  const unranked = game.game !== "blackdrez" && stat && typeof me?.score === "number" && (stat.best_score === null || me.score > stat.best_score);
  const outcome = game.game === "blackdrez"
    ? (me?.place ? `place ${me.place} of ${game.players.length}` : "not ranked")
    : `score ${me?.score ?? "–"}${me?.won ? ", won" : ""}`;
  const others = game.players.filter((p) => p.player !== player);
  return h("li.game-row",
    h("a", { href: gameHref(game.id), class: "replay-link" }, GAME_NAMES[game.game] ?? game.game),
    game.rated ? h("span.badge.rated", "rated") : null,
    privateBadge(game),
    game.arena ? h("a.badge.arena-badge", { href: `#/arena/${encodeURIComponent(game.arena)}`, title: "Played in an arena: its page and standings" }, "arena") : null,
    unranked ? h("span.badge.unranked", { title: `Not a best score: ${UNRANKED_WHY} make a game count as a game only`, style: { borderStyle: "dashed" } }, "with help or not ranked") : null,
    h("span", ` ${outcome}`),
    others.length ? h("span.muted", " vs ", others.map((p, i) => [i ? ", " : "", playerLink(p)])) : null,
    h("span.muted.when", when(game.ended_at)));
}

async function playerPage(ctx, route, page) {
  const profile = await api(`players/${encodeURIComponent(route.id)}`);
  const p = profile.player;
  const mine = ctx.conn.welcome?.player === p.id;
  const stats = profile.stats.map((s) => statCard(s, profile));
  const rated = profile.stats.find((s) => s.game === "blackdrez");
  const width = page.clientWidth - 34; // the panel's padding and border
  swap(page,
    h("section.panel.profile",
      h("div.panel-head",
        h("h2", p.name, p.bot ? h("span.badge.bot", "bot") : null, p.account ? h("span.badge", "account") : p.bot ? null : h("span.badge", "guest")),
        mine && !p.account ? h("a.button", { href: "#/account" }, "Keep this identity") : null,
        mine || p.bot ? null : followBar(ctx, p.id, p.name)),
      h("p.muted", `Playing since ${when(p.first_seen)}`),
      stats.length ? h("div.rec-stats", stats) : h("p.muted", "No finished games yet.")),
    ratingPanel(profile, rated, width),
    h("section.panel",
      h("h2", "Recent games"),
      profile.games.length ? h("ul.games", profile.games.map((g) => gameRow(g, p.id, profile.stats))) : h("p.muted", "None yet.")));
}

/** Follow / Unfollow and Block / Unblock for another player's page, drawn again whenever the
 * server's lists change (they arrive after the page, on a reload). */
function followBar(ctx, player, name) {
  const bar = h("div.buttons.follow-bar", { role: "group", "aria-label": `You and ${name}` });
  const draw = () => swap(bar, followButtons(ctx.friends, player, name));
  const redraw = () => {
    if (bar.isConnected) draw();
    else ctx.friends.removeEventListener("change", redraw);
  };
  ctx.friends.addEventListener("change", redraw);
  draw();
  return bar;
}

/** The name of ``player`` as this page knows it (the friends' lists, a table's seats), or null. */
function knownName(ctx, player) {
  const friend = [...ctx.friends.following, ...ctx.friends.blocked].find((f) => f.player === player);
  if (friend) return friend.name;
  for (const table of ctx.store.tables.values()) {
    const seat = table.info?.seats?.find((s) => s && s.player === player);
    if (seat) return seat.name;
    const said = table.chat?.find((n) => n.event.player === player);
    if (said) return said.event.name;
  }
  return null;
}

// ------------------------------------------------------------------ replay viewer
function card(code, game) {
  if (game === "blackdrez") return pokerCard(code, { small: true });
  return /^[2-9TJQKA][CDHS]$/.test(code) ? standardCard(code) : cardBack("");
}

function cards(codes, game, empty = "none") {
  return codes.length ? h("span.cards", codes.map((c) => card(c, game))) : h("span.muted", empty);
}

/** The table of BlackDrez as spectators saw it after a step (before the first deal, round
 * 0: nobody is in a round yet, and nobody is out of one either). */
function blackdrezBoard(view, players) {
  const names = new Map(players.map((p) => [p.seat, p]));
  const dealt = view.round > 0;
  return h("div.replay-felt",
    h("div.replay-seats", view.seats.map((s) => {
      const who = names.get(s.seat);
      const name = who ? who.name : `Seat ${s.seat + 1}`;
      return h("div.replay-seat", { class: view.to_act === s.seat ? "on-turn" : "", dataset: { seat: s.seat } },
        h("div.seat-name", h("span.name", { title: name }, name), who?.bot ? h("span.badge.bot", "bot") : null),
        h("div.seat-status", !dealt ? "waiting for the deal" : s.in_round ? `${s.status}${s.value !== null ? ` · ${s.value}` : ""}` : "out of the round"),
        // An empty hand once dealt: the round ended and its cards went to the piles (a round
        // won on the deal shows every hand so), or the seat holds none in this round.
        h("div.hand", cards(s.hand, "blackdrez", !dealt ? "" : s.in_round ? "no cards in hand" : "no cards in hand: they went to the piles")),
        h("div.pile", `Pile: ${count(s.pile.length, "card")}`));
    })),
    h("div.replay-centre",
      h("div", h("span.label", "Pot "), cards(view.pot, "blackdrez", "empty")),
      view.carry_over.length ? h("div", h("span.label", "Carried over "), cards(view.carry_over, "blackdrez")) : null,
      h("div", h("span.label", "Stock "), `${view.stock} cards`, view.set_aside.length ? ` · ${view.set_aside.length} set aside` : "")));
}

/** A solitaire as its player saw it (piles of standard cards; hidden cards face down); a game
 * with no board of its own here, as its view's fields. */
function solitaireBoard(view, game) {
  const pile = (codes, label) => h("div.replay-pile", h("span.label", label), cards(codes, game, "empty"));
  if (game === "blackjack_piles") {
    return h("div.replay-felt",
      h("div.replay-piles", view.piles.map((p, i) => pile(p, `Pile ${i + 1}`))),
      h("div.replay-centre", h("div", "Stock: ", view.stock_top ? card(view.stock_top, game) : "—", ` ${view.stock_count} cards`),
        h("div", `Round ${view.round} · score ${view.score}`)));
  }
  if (game !== "blue_jacket") return h("div.replay-felt", viewFields(view));
  return h("div.replay-felt",
    h("div.replay-piles", view.rows.flatMap((row, r) => row.map((p, i) => pile(p, `Row ${r + 1}.${i + 1}`)))),
    h("div.replay-piles", view.bottom.map((p, i) => pile(p, `Bottom ${i + 1}`))),
    h("div.replay-centre", h("div", "Aces: ", cards(view.aces, game, "none")), h("div", `Stock ${view.stock_count} · score ${view.score}`)));
}

function describe(replay, event) {
  if (replay.game !== "blackdrez") return event.type.replaceAll("_", " ");
  const seats = [];
  for (const p of replay.players) seats[p.seat] = { name: p.name };
  return describeEvent({ info: { seats } }, event);
}

async function replayPage(ctx, route, page) {
  const replay = await api(`games/${encodeURIComponent(route.id)}/replay`);
  const last = replay.steps.length - 1;
  let at = 0;
  const board = h("div.replay-board");
  const counter = h("span.replay-counter", { role: "status", "aria-live": "polite" });
  const log = h("ol.replay-events");
  const roundPick = h("select#replay-round", { "aria-label": "Jump to a round", onchange: (e) => go(Number(e.target.value)) },
    h("option", { value: "0" }, "Start"),
    replay.rounds.map((index, i) => h("option", { value: String(index) }, `Round ${i + 1}`)),
    h("option", { value: String(last) }, "End"));
  const buttons = {
    first: h("button#replay-first", { onclick: () => go(0), "aria-label": "First step" }, "|◀"),
    back: h("button#replay-back", { onclick: () => go(at - 1), "aria-label": "Back one step" }, "◀ Back"),
    forward: h("button#replay-forward.primary", { onclick: () => go(at + 1), "aria-label": "Forward one step" }, "Forward ▶"),
    end: h("button#replay-end", { onclick: () => go(last), "aria-label": "Last step" }, "▶|"),
  };

  function go(index) {
    at = Math.max(0, Math.min(last, index));
    const step = replay.steps[at];
    page.dataset.step = String(at);
    counter.textContent = `Step ${at} of ${last}${step.round ? ` · round ${step.round}` : ""}`;
    swap(board, replay.game === "blackdrez" ? blackdrezBoard(step.view, replay.players) : solitaireBoard(step.view, replay.game));
    const actor = replay.players.find((p) => p.seat === step.seat);
    const action = step.action
      ? h("li.replay-action", step.seat < 0 ? "The dealer: " : `${actor?.name ?? `Seat ${step.seat + 1}`}: `, step.action.type.replaceAll("_", " "))
      : h("li.muted", "Before the first card.");
    swap(log, action, step.events.map((e) => h("li", describe(replay, e))));
    buttons.first.disabled = buttons.back.disabled = at === 0;
    buttons.forward.disabled = buttons.end.disabled = at === last;
    const round = [...replay.rounds].reverse().find((i) => i <= at);
    roundPick.value = at === last ? String(last) : round !== undefined ? String(round) : "0";
  }

  ctx.shortcuts = { arrowleft: () => go(at - 1), arrowright: () => go(at + 1), home: () => go(0), end: () => go(last) };
  const fair = replay.fairness;
  const share = `${location.origin}/${gameHref(replay.id)}`;
  swap(page,
    h("section.panel.replay-head",
      h("div.panel-head",
        h("h2", `${GAME_NAMES[replay.game] ?? replay.game}`, replay.rated ? h("span.badge.rated", "rated") : null, privateBadge(replay)),
        h("span.muted", when(replay.ended_at))),
      h("ol.replay-players", [...replay.players].sort((a, b) => (a.place ?? 99) - (b.place ?? 99) || a.seat - b.seat).map((p) => h("li",
        p.place ? h("strong", `${p.place}. `) : null, playerLink(p),
        p.score !== null ? h("span.muted", ` · ${replay.game === "blackdrez" ? count(p.score, "card") : `score ${p.score}`}`) : null,
        p.won ? h("span.badge.won", "won") : null))),
      h("p.share", "Link to this game: ", h("input#share-link", { readonly: true, value: share, "aria-label": "Link to this game", onfocus: (e) => e.target.select() }),
        replay.private ? h("span.muted", " (it opens for the game's players only)") : null)),
    h("section.panel.replay",
      h("div.replay-controls", buttons.first, buttons.back, counter, buttons.forward, buttons.end, roundPick),
      board,
      h("div.replay-log", h("h3", "This step"), log)),
    h("section.panel.fairness-check", { class: fair.verified ? "ok" : "bad" },
      h("h3", fair.verified ? "✓ Fair deal, verified" : "✗ This record does not verify"),
      h("p", "Commitment published before the first card: ", h("code", { title: fair.commitment }, short(fair.commitment ?? "", 24))),
      h("p", "Seed revealed at the end: ", h("code", fair.seed ?? "—")),
      fair.verified
        ? h("p.muted", "The seed hashes to the commitment, every action replays, and the cards dealt are exactly the shuffle's. Check it yourself: download the record and run blackdrez verify.")
        : h("ul", fair.problems.map((p) => h("li", p))),
      h("p", h("a", {
        href: `/api/v1/games/${encodeURIComponent(replay.id)}`,
        download: `${replay.id.replace(":", "-")}.json`,
        onclick: replay.private ? (event) => downloadRecord(event, replay) : null,
      }, "Download the record"))));
  go(0);
}
