// Words for what the server sends as codes: cards, seats, table events and error codes, so that
// nothing on screen (or read by a screen reader) is a raw code like "Q8" or "not_found".

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

const SUITS = { C: "Clubs", D: "Diamonds", H: "Hearts", S: "Spades" };
const RANK_NAMES = { A: "Ace", T: "10", J: "Jack", Q: "Queen", K: "King" };

/** A PokerDrez card in a few words: "Queen 7". */
function pokerShort(code) {
  return `${FIGURES[code[0]].name} ${code.slice(1)}`;
}

/** A PokerDrez card in full, for titles and screen readers. */
export function pokerName(code) {
  const figure = FIGURES[code[0]];
  const number = Number(code.slice(1));
  const points = figure.points === "6/1" ? "6 or 1 points" : `${figure.points} point${figure.points === "1" ? "" : "s"}`;
  return `${figure.name}, ${points} (number ${number}, ${NUMBER_COLOURS[number]})`;
}

/** A standard card in full: "10 of Diamonds". */
export function standardName(code) {
  const rank = RANK_NAMES[code[0]] ?? code[0];
  return `${rank} of ${SUITS[code[1]]}`;
}

/** "1 card", "3 cards". */
/** A table's name as everyone sees it, in the lobby and at the table alike: its own, or its
 * host's ("Ada's table") when it was made without one (by a bot, say). */
export function tableName(info) {
  if (info.name) return info.name;
  const host = info.seats?.find((seat) => seat && seat.player === info.host);
  return host ? `${host.name}’s table` : "BlackDrez table";
}

export function count(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

/** "Ann", "Ann and Bob", "Ann, Bob and Cy". */
export function listing(names) {
  return names.length < 2 ? names.join("") : `${names.slice(0, -1).join(", ")} and ${names[names.length - 1]}`;
}

/** Display names of a table's seats; duplicate names get a number so they can be told apart. */
export function seatNames(info) {
  return displayNames((info?.seats ?? []).map((s) => s?.name ?? null));
}

/** Display names for the names seated at each seat (null: empty or unknown, "Seat N"). */
function displayNames(raw) {
  const names = raw.map((name, i) => name ?? `Seat ${i + 1}`);
  const seen = new Map();
  const total = new Map();
  for (const name of names) total.set(name, (total.get(name) ?? 0) + 1);
  return names.map((name) => {
    if (total.get(name) < 2) return name;
    const n = (seen.get(name) ?? 0) + 1;
    seen.set(name, n);
    return n === 1 ? name : `${name} (${n})`;
  });
}

/** The name of ``seat`` at ``table`` as the table shows it: with ``names`` (who sat where when
 * the event happened, as the table store keeps it with each logged event), the name then; else
 * the name now. */
function nameOf(table, seat, names) {
  if (seat === null || seat === undefined) return "someone";
  return (names ? displayNames(names) : seatNames(table.info))[seat] ?? `Seat ${seat + 1}`;
}

const SEAT_FREED = { left: "left", timeout: "lost the connection for too long", kicked: "was removed by the host" };

/** One line of the BlackDrez table log for an event, in words; ``names`` are the seats' names
 * when it happened (a player who left since keeps theirs), else the table's names now. */
export function describeEvent(table, e, names = null) {
  const who = (seat) => nameOf(table, seat, names);
  switch (e.type) {
    case "seat_taken": return `${e.name} sat down${e.bot ? " (a bot)" : ""}`;
    case "seat_freed": {
      const kept = (table?.info?.held ?? []).find((x) => x.seat === e.seat);
      return kept
        ? `${kept.name} left seat ${e.seat + 1}: it is kept for them until this rated game ends`
        : `Seat ${e.seat + 1} is free: its player ${SEAT_FREED[e.reason] ?? e.reason}`;
    }
    case "ready_changed": return `${who(e.seat)} is ${e.ready ? "ready" : "not ready"}`;
    case "presence": return `${who(e.seat)} ${e.connected ? "is back" : "lost the connection"}`;
    case "game_started": return "A new game started";
    case "timed_out": return `${who(e.seat)} ran out of time and ${e.action?.type === "withdraw" ? "withdrew" : "played automatically"}`;
    case "round_started": {
      const hands = e.seats.map((s) => `${who(s)} ${e.values[s]}`).join(", ");
      return `Round ${e.round}: ${who(e.dealer)} deals. ${hands}`;
    }
    case "hit": return `${who(e.seat)} hit a ${pokerShort(e.card)}: ${e.value > 11 ? `${e.value}, bust` : e.value === 11 ? "11!" : e.value}`;
    case "bust": return `${who(e.seat)} is bust and out of the round`;
    case "withdrew": return `${who(e.seat)} withdrew, keeping ${e.kept.length ? e.kept.map(pokerShort).join(", ") : "nothing"}`;
    case "stood": return `${who(e.seat)} stood`;
    case "turn": return `${who(e.seat)} to play`;
    case "round_won": return `${who(e.seat)} won the round ${e.reason === "eleven" ? "with 11" : "as the last player in it"} and took ${count(e.cards.length, "card")}`;
    case "pot_split": {
      const shares = e.winners.map((s, i) => `${who(s)} takes ${count(e.shares[i].length, "card")}`).join(", ");
      const carry = e.carry_over.length ? `; ${count(e.carry_over.length, "card")} carried over to the next round` : "";
      return `The pot is split (${e.reason === "eleven" ? "several 11s on the deal" : "everyone stood"}): ${shares}${carry}`;
    }
    case "game_over": return "The game is over";
    case "par": return `Par for this deal (perfect play, seeing every card): ${e.par}${e.exact ? "" : " or more"}; you scored ${e.score}`;
    case "table_closed": return `The table closed: ${e.reason}`;
    case "undone": return "A move was taken back";
    // Chat lines show in the table's chat (chat.js), not in its log; told here all the same.
    case "said": return `${e.name ?? "Someone"}${e.seat === null ? " (watching)" : ""}: ${e.text ?? ""}`;
    case "spectator_removed": return `The host sent ${e.name ?? "a spectator"} away from the table`;
    default: return e.type.replaceAll("_", " ");
  }
}

const ERRORS = {
  not_found: "That table is gone: it closed, or the link is wrong.",
  table_full: "Every seat at that table is taken. You can watch it, or pick another table.",
  seat_taken: "Someone just took that seat. Pick another one.",
  already_seated: "You already have a seat at this table.",
  not_seated: "You are not seated at this table.",
  not_host: "Only the table's host can do that.",
  invite_required: "This table is private: you need its invite code.",
  game_running: "A game is already running at this table.",
  not_enough_players: "Two ready players are needed to start: add a bot or wait for someone.",
  not_your_turn: "It is not your turn.",
  game_over: "This game is over.",
  not_in_round: "You are not playing this round: you join at the next one.",
  bad_action: "The server did not understand that move.",
  bad_message: "The server did not understand that request.",
  bad_frame: "The server did not understand that request.",
  unknown_type: "The server does not know that request (is the page out of date? Reload it).",
  rate_limited: "Too many clicks at once: slow down a moment.",
  unavailable: "The server could not save that just now: nothing changed, try again.",
  moving: "The table is moving to another server: try again in a moment.",
  shutting_down: "The server is restarting: you will be reconnected.",
  internal: "Something went wrong on the server. Try again.",
  bad_token: "Your session expired: you are playing as a new guest.",
  signed_out: "This account was signed out everywhere (from another tab or device): you are playing as a new guest. Sign in again to play as yourself.",
  nothing_to_undo: "Nothing to undo: moves made before the last card was revealed cannot be taken back.",
  not_a_solitaire: "Hints and undo are for the solitaires only.",
  sealed: "That stays sealed until the day is over (UTC).",
  closed: "Not connected: reconnecting…",
  removed: "The host sent you away from this table: you cannot watch it again.",
  chat_closed: "Spectators cannot write at this table: the host keeps its chat to the players.",
  replaced: "You are playing in another tab or browser: press Play here to play in this one.",
};

/** A sentence for an error reply (or a failed request), never a raw code. */
export function errorText(error) {
  const code = error?.code;
  if (code === "illegal_action") {
    const detail = String(error.message || "").replace(/^illegal_action:\s*/, "");
    return detail ? `That move is not allowed: ${detail}.` : "That move is not allowed now.";
  }
  return ERRORS[code] ?? "That did not work. Try again.";
}
