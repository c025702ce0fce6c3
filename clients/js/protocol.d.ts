// Generated from the protocol's JSON Schema by `python -m blackdrez.protocol.typescript`; do not edit.
// The BlackDrez protocol, version 1 (docs/protocol.md): every message and payload.

export type HandshakeReply = Welcome | Error;

export type ClientMessage = Hello | WatchLobby | UnwatchLobby | ListTables | CreateTable | JoinTable | QuickJoin | Spectate | LeaveTable | SetReady | StartGame | AddBots | RemoveBot | Act | Resync | StartSolitaire | Hint | Undo | Say | RemoveSpectator | Report | FindGame | CancelFind | CreateArena | JoinArena | LeaveArena | WatchArena | UnwatchArena | ListArenas | Follow | Unfollow | Block | Unblock | GetFriends | Challenge | AnswerChallenge | GetDaily | GetLeaderboard | GetRecord | Ping | Logout | SignUp | SignIn | SignOutEverywhere;

export type ServerMessage = Welcome | Error | Ok | Joined | Snapshot | Update | Tables | LobbyUpdate | Leaderboard | HintReply | Daily | GameRecord | Pong | Shutdown | Session | Queued | MatchFound | Arena | ArenaStandings | Arenas | Friends | ChallengeSent | Challenged | ChallengeAnswered;

export type TableEvent = SeatTaken | SeatFreed | ReadyChanged | PresenceChanged | GameStarted | TimedOut | TableClosed | Par | Undone | Said | SpectatorRemoved;

export type BlackdrezAction = blackdrez_StartRound | blackdrez_EndGame | blackdrez_Hit | blackdrez_Withdraw | blackdrez_Stand;

export type BlackdrezEvent = blackdrez_RoundStarted | blackdrez_HitCard | blackdrez_Bust | blackdrez_Withdrew | blackdrez_Stood | blackdrez_Turn | blackdrez_RoundWon | blackdrez_PotSplit | blackdrez_GameOver;

export type BlackdrezView = blackdrez_View;

export type BlackjackPilesAction = blackjack_piles_Place | blackjack_piles_Cash | blackjack_piles_Move | blackjack_piles_EndRound | blackjack_piles_Resign;

export type BlackjackPilesEvent = blackjack_piles_Placed | blackjack_piles_Cashed | blackjack_piles_Moved | blackjack_piles_RoundEnded | blackjack_piles_RoundStarted | blackjack_piles_GameOver;

export type BlackjackPilesView = blackjack_piles_View;

export type BlueJacketAction = blue_jacket_Move | blue_jacket_Interchange | blue_jacket_Deal | blue_jacket_Resign;

export type BlueJacketEvent = blue_jacket_Moved | blue_jacket_Interchanged | blue_jacket_Dealt | blue_jacket_NoProgress | blue_jacket_GameOver;

export type BlueJacketView = blue_jacket_View;

/**
 * Play an action: one of the table's game's actions, e.g. ``{"type": "hit"}``.
 */
export interface Act {
  type: "act";
  id?: number | null;
  table: string;
  action: Record<string, unknown>;
}

/**
 * Host only: fill empty seats with bots the server starts; they connect like anyone else
 * (over the public protocol, seeing only their own seat) and are ready at once.
 */
export interface AddBots {
  type: "add_bots";
  id?: number | null;
  table: string;
  count?: number;
  strategy?: "bust_probability" | "threshold";
}

/**
 * Accept or decline a challenge you were sent (reply ``ok``; on accept, both of you get
 * ``match_found`` for the new table, the game started).
 */
export interface AnswerChallenge {
  type: "answer_challenge";
  id?: number | null;
  challenge: string;
  accept: boolean;
}

/**
 * The answer to ``create_arena``, ``join_arena`` and ``watch_arena``: the arena and its
 * standings (best first); ``invite``: a private arena's code, for who may pass it on.
 */
export interface Arena {
  type: "arena";
  id?: number | null;
  arena: ArenaInfo;
  standings: Array<StandingInfo>;
  invite?: string | null;
}

/**
 * An arena as its players see it.
 */
export interface ArenaInfo {
  id: string;
  name: string;
  maker: string;
  starts: number;
  ends: number;
  seats: number;
  rated: boolean;
  private: boolean;
  status: "finished" | "running" | "upcoming";
  players?: number;
}

/**
 * What the maker of an arena chooses.
 */
export interface ArenaOptions {
  name: string;
  minutes?: number;
  seats?: number;
  rated?: boolean;
  private?: boolean;
  starts_in?: number;
}

/**
 * Pushed to an arena's players and watchers when its standings change (a game scored, a
 * player joined or left). Its start and end are its info's times: no push marks them.
 */
export interface ArenaStandings {
  type: "arena_standings";
  arena: ArenaInfo;
  standings: Array<StandingInfo>;
}

/**
 * Arenas
 */
export interface Arenas {
  type: "arenas";
  id?: number | null;
  arenas: Array<ArenaInfo>;
}

/**
 * Block a player (reply ``ok``): their challenges are refused, and clients hide their chat
 * lines from you (your ``friends`` lists whom you block). Blocking also stops following.
 */
export interface Block {
  type: "block";
  id?: number | null;
  player: string;
}

/**
 * Leave the matchmaking queue (reply ``ok``; also when not queueing).
 */
export interface CancelFind {
  type: "cancel_find";
  id?: number | null;
}

/**
 * Invite a player you name to a BlackDrez table of two (reply ``challenge_sent`` with the
 * challenge's id): they are told ``challenged`` wherever they are connected, and may accept
 * or decline within :data:`CHALLENGE_SECONDS` (``answer_challenge``). Refused with
 * ``not_found`` when they are not connected, ``challenge_refused`` when they block you.
 */
export interface Challenge {
  type: "challenge";
  id?: number | null;
  player: string;
  rated?: boolean;
}

/**
 * Pushed to the challenger: the challenged player declined (an accepted challenge brings
 * ``match_found`` instead), or it expired unanswered.
 */
export interface ChallengeAnswered {
  type: "challenge_answered";
  challenge: string;
  accepted: boolean;
}

/**
 * ChallengeSent
 */
export interface ChallengeSent {
  type: "challenge_sent";
  id?: number | null;
  challenge: string;
  expires: number;
}

/**
 * Pushed to a player someone challenged (``answer_challenge`` to answer).
 */
export interface Challenged {
  type: "challenged";
  challenge: string;
  player: string;
  name: string;
  rated: boolean;
  expires: number;
}

/**
 * Make an arena (reply ``arena``, with its invite code when private): a tournament of a
 * fixed length whose players are paired into new tables as soon as they are free.
 */
export interface CreateArena {
  type: "create_arena";
  id?: number | null;
  options: ArenaOptions;
}

/**
 * Create a BlackDrez table and take its first seat as its host.
 */
export interface CreateTable {
  type: "create_table";
  id?: number | null;
  options?: TableOptions;
  spectator_chat?: boolean;
}

/**
 * A daily deal. Its seed is drawn at random the first time the day's deal is asked for
 * and committed to at once (``commitment``, SHA-256 of the seed); ``seed`` is revealed once
 * the day has ended, so nobody can compute the stock in advance.
 */
export interface Daily {
  type: "daily";
  id?: number | null;
  game: string;
  day: string;
  commitment: string;
  starts: number;
  ends: number;
  seed?: string | null;
}

/**
 * Error
 */
export interface Error {
  type: "error";
  id?: number | null;
  code: string;
  message: string;
  supported?: Array<number> | null;
  retry_after?: number | null;
}

/**
 * Queue for a BlackDrez table with players of close ratings (reply ``queued``; once a
 * table is made, ``match_found``): ``seats`` the table size wanted (``None``: any), rated or
 * casual, and after how many seconds of waiting bots may take the seats nobody took
 * (``None``: never). The server groups players whose ratings are close, widening the band
 * the longer they wait, so that nobody waits for ever. One place per player, whichever of
 * their connections asks: a second ``find_game`` changes the choices and keeps the place (the
 * wait goes on from the first), also after a reconnect to another node within
 * ``queued.keep_seconds``.
 */
export interface FindGame {
  type: "find_game";
  id?: number | null;
  seats?: number | null;
  rated?: boolean;
  bots_after?: number | null;
}

/**
 * Follow a player (reply ``ok``): they are listed in your ``friends``, with whether they
 * are online, playing or watching. Following is one-way and nobody is told.
 */
export interface Follow {
  type: "follow";
  id?: number | null;
  player: string;
}

/**
 * A player you follow (or block), and where they are now.
 */
export interface Friend {
  player: string;
  name: string;
  status?: "offline" | "online" | "playing" | "watching";
  table?: string | null;
}

/**
 * Friends
 */
export interface Friends {
  type: "friends";
  id?: number | null;
  following: Array<Friend>;
  blocked: Array<Friend>;
}

/**
 * A ranked game's record: ``text`` is the JSON file ``blackdrez verify`` checks.
 */
export interface GameRecord {
  type: "record";
  id?: number | null;
  record: string;
  text: string;
}

/**
 * A game began; ``commitment`` is SHA-256 of its seed, revealed when it ends.
 */
export interface GameStarted {
  type: "game_started";
  game: "blackdrez" | "blackjack_piles" | "blue_jacket";
  commitment: string | null;
  deal?: number | null;
}

/**
 * The daily deal of a solitaire for a UTC day (default: today): its commitment, and its
 * seed once the day has ended (reply ``daily``).
 */
export interface GetDaily {
  type: "daily";
  id?: number | null;
  game: "blackjack_piles" | "blue_jacket";
  day?: string | null;
}

/**
 * Who you follow, each with where they are now, and whom you block (reply ``friends``).
 */
export interface GetFriends {
  type: "friends";
  id?: number | null;
}

/**
 * A leaderboard: one game, daily deals or random deals, one UTC day (``day``) or all
 * time, games played without help or (``assisted``) with hints or undos.
 */
export interface GetLeaderboard {
  type: "leaderboard";
  id?: number | null;
  game: "blackjack_piles" | "blue_jacket";
  limit?: number;
  deal?: "daily" | "random";
  day?: string | null;
  assisted?: boolean;
}

/**
 * A leaderboard entry's game record (reply ``record``).
 */
export interface GetRecord {
  type: "get_record";
  id?: number | null;
  record: string;
}

/**
 * A free seat nobody else may take until the game ends: at a rated table it holds the
 * result of the player who played its rounds and left (they may sit there again).
 */
export interface HeldSeat {
  seat: number;
  player: string;
  name: string;
}

/**
 * Client -> server, the first message. Unknown fields are ignored: old servers accept new
 * clients.
 */
export interface Hello {
  type: "hello";
  versions: Array<number>;
  name?: string | null;
  token?: string | null;
  client?: string | null;
}

/**
 * Ask for a good move in your solitaire session (reply ``hint``). The session's game is
 * marked as helped from then on: it is ranked apart.
 */
export interface Hint {
  type: "hint";
  id?: number | null;
  table: string;
}

/**
 * The answer to ``hint``: the move the expert bot would play now, one of your legal
 * actions (its source and destination are the ones to highlight). When the expert is busy
 * or does not answer within its time budget, a quicker bot's move is given: ``by`` names
 * the bot that chose it.
 */
export interface HintReply {
  type: "hint";
  id?: number | null;
  table: string;
  action: unknown;
  by?: string;
  hints: number;
}

/**
 * Play in an arena (reply ``arena``; its standings pushed from then on, as with
 * ``watch_arena``): you are queued for your next table there, made with players of the arena
 * only (``match_found``). Send it again after each game to be paired again (the clients do);
 * joining again keeps your points.
 */
export interface JoinArena {
  type: "join_arena";
  id?: number | null;
  arena: string;
  invite?: string | null;
}

/**
 * Take a seat (a given one, or the first free one).
 */
export interface JoinTable {
  type: "join";
  id?: number | null;
  table: string;
  seat?: number | null;
  invite?: string | null;
}

/**
 * You sit at (or watch) a table; a ``snapshot`` of it follows.
 */
export interface Joined {
  type: "joined";
  id?: number | null;
  table: TableInfo;
  seat: number | null;
  invite?: string | null;
}

/**
 * Leaderboard
 */
export interface Leaderboard {
  type: "leaderboard";
  id?: number | null;
  game: string;
  entries: Array<LeaderboardEntry>;
  deal?: "daily" | "random";
  day?: string | null;
  assisted?: boolean;
}

/**
 * One ranked game: the player's best on this board.
 */
export interface LeaderboardEntry {
  rank: number;
  player: string;
  name: string;
  score: number;
  won?: boolean | null;
  day?: string | null;
  deal?: "daily" | "random" | null;
  hints?: number;
  undos?: number;
  record?: string | null;
  finished?: number | null;
}

/**
 * Stop being paired in an arena (reply ``ok``); your points stay in its standings.
 */
export interface LeaveArena {
  type: "leave_arena";
  id?: number | null;
  arena: string;
}

/**
 * Give up the seat (or stop spectating). During a round the player withdraws first.
 */
export interface LeaveTable {
  type: "leave";
  id?: number | null;
  table: string;
}

/**
 * The server's limits, sent in ``welcome``.
 */
export interface Limits {
  max_frame_bytes: number;
  messages_per_second: number;
  burst: number;
  idle_timeout_seconds: number;
  replay_events: number;
}

/**
 * The public arenas upcoming, running, or finished within the last day (reply
 * ``arenas``).
 */
export interface ListArenas {
  type: "list_arenas";
  id?: number | null;
}

/**
 * The public tables, once.
 */
export interface ListTables {
  type: "list_tables";
  id?: number | null;
}

/**
 * Pushed to lobby watchers: tables added or changed, and tables gone.
 */
export interface LobbyUpdate {
  type: "lobby";
  tables?: Array<TableInfo>;
  removed?: Array<string>;
}

/**
 * End this connection's session token on every node (reply ``ok``, then the server closes
 * the connection with 1000); ``hello`` with it is refused from then on.
 */
export interface Logout {
  type: "logout";
  id?: number | null;
}

/**
 * Pushed when the queue made your table: you sit at ``table`` in ``seat`` (send ``join``
 * or ``resync`` to watch it; until you do, you count as away there, and the seat is freed
 * after the table's grace), with ``players`` (their names, yours included, seat order) and
 * ``bots`` seats taken by bots. The game starts at once; you left the queue.
 */
export interface MatchFound {
  type: "match_found";
  table: string;
  seat: number;
  players: Array<string>;
  bots: number;
  rated: boolean;
  waited: number;
  arena?: string | null;
}

/**
 * One table event with its sequence number.
 */
export interface Numbered {
  seq: number;
  event: unknown;
}

/**
 * A request succeeded; ``seq`` is the table's last event number after it, where relevant.
 */
export interface Ok {
  type: "ok";
  id?: number | null;
  seq?: number | null;
}

/**
 * After a solitaire ends: what perfect play, seeing the cards to come, would have scored on
 * the same deal, beside the player's ``score`` (docs/solitaire.md). ``par`` is never below
 * ``score``; ``exact`` is false when the bounded search ran out first (``par`` is then the best
 * line it found, a lower bound). Blackjack Piles gives each round the player played in
 * ``rounds``, and ``par`` is their sum.
 */
export interface Par {
  type: "par";
  score: number;
  par: number;
  exact: boolean;
  rounds?: Array<RoundPar>;
}

/**
 * Application-level ping; the reply ``pong`` echoes ``id`` and gives the server's time.
 */
export interface Ping {
  type: "ping";
  id?: number | null;
}

/**
 * Pong
 */
export interface Pong {
  type: "pong";
  id?: number | null;
  time: number;
}

/**
 * PresenceChanged
 */
export interface PresenceChanged {
  type: "presence";
  seat: number;
  connected: boolean;
}

/**
 * The answer to ``find_game``: you wait for a table, since ``since`` (Unix time), with the
 * rating the queue matches you by (the one people see; 1500 when you have none, and at a
 * casual table). Opponents are first looked for within ``band`` points of it, the band
 * growing by ``widen`` points each second, and any rating is accepted after ``anyone_after``
 * seconds. ``waiting``: the players queueing now, you included. The place is kept
 * ``keep_seconds`` after the connection is lost: a ``find_game`` within them keeps it.
 */
export interface Queued {
  type: "queued";
  id?: number | null;
  since: number;
  rating: number;
  seats: number | null;
  rated: boolean;
  bots_after: number | null;
  waiting: number;
  band: number;
  widen: number;
  anyone_after: number;
  keep_seconds: number;
}

/**
 * Join an open public table with a free seat, or create one.
 */
export interface QuickJoin {
  type: "quick_join";
  id?: number | null;
}

/**
 * ReadyChanged
 */
export interface ReadyChanged {
  type: "ready_changed";
  seat: number;
  ready: boolean;
}

/**
 * Host only: the bot in ``seat`` leaves the table (after the round it is playing, like any
 * player who leaves) and disconnects.
 */
export interface RemoveBot {
  type: "remove_bot";
  id?: number | null;
  table: string;
  seat: number;
}

/**
 * The host sends a spectator away (event ``spectator_removed``): they stop watching, and
 * may neither watch nor write at this table again.
 */
export interface RemoveSpectator {
  type: "remove_spectator";
  id?: number | null;
  table: string;
  player: string;
}

/**
 * Report a line of a table's chat (its event number ``seq``) to the operators, with an
 * optional ``reason``: they see it, and the lines before it, in the admin view. Anyone at the
 * table may report a line still among its last 50; the reply is ``ok`` and nobody else is
 * told.
 */
export interface Report {
  type: "report";
  id?: number | null;
  table: string;
  seq: number;
  reason?: string;
}

/**
 * I have every event up to ``since``: send the rest, or a snapshot.
 */
export interface Resync {
  type: "resync";
  id?: number | null;
  table: string;
  since?: number;
}

/**
 * One round of a solitaire next to its par (Blackjack Piles).
 */
export interface RoundPar {
  round: number;
  score: number;
  par: number;
  exact: boolean;
}

/**
 * A line of the table's chat: ``text`` as written (plain text: show it as text, never as
 * markup), or the canned ``quick`` line (its English ``text`` given too). ``seat`` is the
 * writer's seat, ``None`` for a spectator.
 */
export interface Said {
  type: "said";
  player: string;
  name: string;
  seat?: number | null;
  text: string;
  quick?: "good_game" | "good_luck" | "hello" | "oops" | "thanks" | "well_played" | null;
  bot?: boolean;
}

/**
 * Write a line in a table's chat (reply ``ok``, event ``said`` to everyone there): ``text``
 * (plain text, at most :data:`CHAT_CHARACTERS` characters, never markup) or a canned ``quick``
 * line, not both. Players may always write; spectators if the table's ``spectator_chat``
 * allows (``create_table``). Too many lines too fast: ``rate_limited`` (the connection
 * stays). The chat is not part of any game's record.
 */
export interface Say {
  type: "say";
  id?: number | null;
  table: string;
  text?: string | null;
  quick?: "good_game" | "good_luck" | "hello" | "oops" | "thanks" | "well_played" | null;
}

/**
 * SeatFreed
 */
export interface SeatFreed {
  type: "seat_freed";
  seat: number;
  reason?: "kicked" | "left" | "timeout";
}

/**
 * Who sits in a seat.
 */
export interface SeatInfo {
  player: string;
  name: string;
  ready?: boolean;
  connected?: boolean;
  bot?: boolean;
  rating?: SeatRating | null;
}

/**
 * A seated player's rating at a rated table (Weng-Lin, as on the leaderboards of the
 * records API: ``docs/api.md``).
 */
export interface SeatRating {
  ordinal: number;
  mu: number;
  sigma: number;
  games: number;
  provisional: boolean;
}

/**
 * SeatTaken
 */
export interface SeatTaken {
  type: "seat_taken";
  seat: number;
  player: string;
  name: string;
  bot?: boolean;
}

/**
 * The answer to ``sign_up``, ``sign_in`` and ``sign_out_everywhere``: an account's identity
 * and the session token to greet with from now on.
 */
export interface Session {
  type: "session";
  id?: number | null;
  player: string;
  name: string;
  token: string;
}

/**
 * SetReady
 */
export interface SetReady {
  type: "ready";
  id?: number | null;
  table: string;
  ready?: boolean;
}

/**
 * The server is going away; reconnect after ``reconnect_after`` seconds with your token.
 */
export interface Shutdown {
  type: "shutdown";
  reason: string;
  reconnect_after?: number;
}

/**
 * Log in to the account claimed under ``name``: the reply ``session`` carries its token;
 * greet again with it (a new connection, or after a reload) to play as that identity.
 * Attempts are rate-limited per account name and per client address.
 */
export interface SignIn {
  type: "sign_in";
  id?: number | null;
  name: string;
  password: string;
}

/**
 * Refuse every token of this connection's account from now on (other browsers too); the
 * reply ``session`` carries a fresh token for this browser.
 */
export interface SignOutEverywhere {
  type: "sign_out_everywhere";
  id?: number | null;
}

/**
 * Claim this connection's guest identity (its player id, so its games and rating) under
 * ``name`` with ``password``. The reply ``session`` carries the token to use from now on (the
 * guest token is refused once the identity is claimed).
 */
export interface SignUp {
  type: "sign_up";
  id?: number | null;
  name: string;
  password: string;
}

/**
 * A table's complete state for this viewer, up to and including event ``seq``.
 */
export interface Snapshot {
  type: "snapshot";
  id?: number | null;
  table: string;
  seq: number;
  info: TableInfo;
  seat: number | null;
  view: unknown | null;
  legal?: Array<unknown>;
  deadline?: number | null;
  recent?: Array<Numbered>;
  chat?: Array<Numbered>;
}

/**
 * Spectate
 */
export interface Spectate {
  type: "spectate";
  id?: number | null;
  table: string;
  invite?: string | null;
}

/**
 * The host sent ``player`` (a spectator) away from this table.
 */
export interface SpectatorRemoved {
  type: "spectator_removed";
  player: string;
  name: string;
}

/**
 * One player's line in an arena's standings.
 */
export interface StandingInfo {
  rank: number;
  player: string;
  name: string;
  bot: boolean;
  points: number;
  games: number;
  wins: number;
  streak: number;
  on_fire: boolean;
  results: Array<number>;
  active: boolean;
}

/**
 * Host only: start a game with the ready players (at least two).
 */
export interface StartGame {
  type: "start";
  id?: number | null;
  table: string;
}

/**
 * Start a solitaire session: a random deal, a numbered one anyone can replay (never
 * ranked: its seed is public), or today's daily deal (``daily``; not with ``deal``).
 */
export interface StartSolitaire {
  type: "start_solitaire";
  id?: number | null;
  game: "blackjack_piles" | "blue_jacket";
  deal?: number | null;
  daily?: boolean;
}

/**
 * TableClosed
 */
export interface TableClosed {
  type: "table_closed";
  reason: string;
}

/**
 * A table as the lobby and its players see it.
 */
export interface TableInfo {
  id: string;
  game: "blackdrez" | "blackjack_piles" | "blue_jacket";
  name: string;
  status: "closed" | "finished" | "open" | "playing";
  seats: Array<SeatInfo | null>;
  host: string;
  spectators?: number;
  private?: boolean;
  round?: number;
  options?: TableOptions | null;
  commitment?: string | null;
  ranked?: boolean;
  daily?: string | null;
  hints?: number;
  undos?: number;
  undoable?: number;
  held?: Array<HeldSeat>;
  spectator_chat?: boolean;
  arena?: string | null;
}

/**
 * What a host chooses when creating a BlackDrez table.
 */
export interface TableOptions {
  name?: string;
  seats?: number;
  decks?: number | null;
  turn_seconds?: number;
  grace_seconds?: number;
  max_rounds?: number | null;
  round_pause_seconds?: number;
  private?: boolean;
  rated?: boolean;
}

/**
 * Tables
 */
export interface Tables {
  type: "tables";
  id?: number | null;
  tables: Array<TableInfo>;
}

/**
 * The player on turn ran out of time; ``action`` was played for them.
 */
export interface TimedOut {
  type: "timed_out";
  seat: number;
  action: unknown;
}

/**
 * Unblock
 */
export interface Unblock {
  type: "unblock";
  id?: number | null;
  player: string;
}

/**
 * Take back your last move in your solitaire session (reply ``ok``, event ``undone``).
 * Only moves since the last card was revealed can be taken back (a deal in Blue Jacket, a
 * new stock card or round in Blackjack Piles), so an undo never shows anything new; nor can
 * a game that ended. The game is marked as helped: it is ranked apart.
 */
export interface Undo {
  type: "undo";
  id?: number | null;
  table: string;
}

/**
 * The player took ``action`` back (the view is as it was before it); ``undoable`` more
 * moves can still be taken back.
 */
export interface Undone {
  type: "undone";
  action: unknown;
  undoable: number;
}

/**
 * Unfollow
 */
export interface Unfollow {
  type: "unfollow";
  id?: number | null;
  player: string;
}

/**
 * UnwatchArena
 */
export interface UnwatchArena {
  type: "unwatch_arena";
  id?: number | null;
  arena: string;
}

/**
 * UnwatchLobby
 */
export interface UnwatchLobby {
  type: "unwatch_lobby";
  id?: number | null;
}

/**
 * New events at a table, and this viewer's view after them.
 */
export interface Update {
  type: "update";
  id?: number | null;
  table: string;
  seq: number;
  events: Array<Numbered>;
  view: unknown | null;
  legal?: Array<unknown>;
  deadline?: number | null;
  info?: TableInfo | null;
}

/**
 * Follow an arena's standings without playing (reply ``arena``, then
 * ``arena_standings`` pushes).
 */
export interface WatchArena {
  type: "watch_arena";
  id?: number | null;
  arena: string;
  invite?: string | null;
}

/**
 * Subscribe to the live table list: a ``tables`` reply now, then ``lobby`` pushes.
 */
export interface WatchLobby {
  type: "watch_lobby";
  id?: number | null;
}

/**
 * The handshake's answer: the version spoken from now on, and who you are.
 */
export interface Welcome {
  type: "welcome";
  version: number;
  token: string;
  token_expires: number;
  player: string;
  name: string;
  limits: Limits;
  server: string;
  tables?: Array<string>;
}

/**
 * ``seat`` went over 11; its ``cards`` moved to the pot.
 */
export interface blackdrez_Bust {
  type: "bust";
  seat: number;
  value: number;
  cards: Array<string>;
}

/**
 * End the game now (SYSTEM only, between rounds): fewer than two seats can play.
 */
export interface blackdrez_EndGame {
  type: "end_game";
}

/**
 * The game ended: the ``result``, the revealed ``seed`` and the cards set aside.
 */
export interface blackdrez_GameOver {
  type: "game_over";
  result: blackdrez_Result;
  seed: string | null;
  set_aside: Array<string>;
}

/**
 * Take the top card of the stock.
 */
export interface blackdrez_Hit {
  type: "hit";
}

/**
 * ``seat`` took ``card``; ``value`` is the hand's new value (over 11: bust).
 */
export interface blackdrez_HitCard {
  type: "hit";
  seat: number;
  card: string;
  value: number;
  stock: number;
}

/**
 * One place of the final ranking: the seats sharing it and their pile size.
 */
export interface blackdrez_Place {
  place: number;
  seats: Array<number>;
  cards: number;
}

/**
 * The pot was shared: ``shares[i]`` went to ``winners[i]``; ``carry_over`` stays.
 */
export interface blackdrez_PotSplit {
  type: "pot_split";
  winners: Array<number>;
  reason: "eleven" | "stand";
  shares: Array<Array<string>>;
  carry_over: Array<string>;
}

/**
 * The final outcome: the ranking by pile size, rounds played and why the game ended
 * (``stock`` too short for another round, ``max_rounds`` played, or ``players``: fewer than
 * two seats could play the next round).
 */
export interface blackdrez_Result {
  ranking: Array<blackdrez_Place>;
  rounds: number;
  reason: "max_rounds" | "players" | "stock";
}

/**
 * A round began: ``hands[seat]`` is what each seat was dealt (empty when sitting out).
 */
export interface blackdrez_RoundStarted {
  type: "round_started";
  round: number;
  seats: Array<number>;
  dealer: number;
  hands: Array<Array<string>>;
  values: Array<number | null>;
  stock: number;
}

/**
 * ``seat`` won the round (``eleven`` or ``last_player``) and took ``cards`` to its pile.
 */
export interface blackdrez_RoundWon {
  type: "round_won";
  seat: number;
  reason: "eleven" | "last_player";
  cards: Array<string>;
}

/**
 * One seat as everyone sees it; ``value`` is ``None`` for an empty hand.
 */
export interface blackdrez_SeatView {
  seat: number;
  in_round: boolean;
  status: "bust" | "lost" | "out" | "playing" | "stood" | "winner" | "withdrawn";
  hand: Array<string>;
  value: number | null;
  pile: Array<string>;
}

/**
 * Pass the turn right; only when every hand in the round is level.
 */
export interface blackdrez_Stand {
  type: "stand";
}

/**
 * Start a round with ``seats`` (SYSTEM only); ``newcomers`` start with an empty pile.
 */
export interface blackdrez_StartRound {
  type: "start_round";
  seats: Array<number>;
  newcomers?: Array<number>;
}

/**
 * ``seat`` stood on level hands.
 */
export interface blackdrez_Stood {
  type: "stood";
  seat: number;
}

/**
 * ``seat`` is to act.
 */
export interface blackdrez_Turn {
  type: "turn";
  seat: number;
}

/**
 * The game as every viewer sees it (all cards are face up; the stock is a count). It names
 * no viewer, so one encoding serves every seat and spectator alike.
 *
 * ``dealer`` is the dealer of the round in play or, between rounds, of the round just played
 * (the first dealer before round 1). ``next_dealer`` is the seat due to deal the next round
 * (if it plays it; otherwise the first playing seat to its right), ``None`` while a round is
 * played and once the game is over. ``seats[i].in_round`` and ``status`` describe the current
 * or last round.
 */
export interface blackdrez_View {
  game?: string;
  round: number;
  phase: "between_rounds" | "over" | "playing";
  dealer: number;
  next_dealer: number | null;
  to_act: number | null;
  last_actor: number | null;
  seats: Array<blackdrez_SeatView>;
  pot: Array<string>;
  carry_over: Array<string>;
  set_aside: Array<string>;
  stock: number;
  decks: number;
  commitment: string | null;
  seed: string | null;
  result: blackdrez_Result | null;
}

/**
 * Leave the round keeping half of the hand (rounded down).
 */
export interface blackdrez_Withdraw {
  type: "withdraw";
}

/**
 * ``seat`` left the round: ``kept`` went to its pile, ``left`` to the pot.
 */
export interface blackdrez_Withdrew {
  type: "withdrew";
  seat: number;
  kept: Array<string>;
  left: Array<string>;
}

/**
 * Cash the tops of ``piles`` (increasing indices), plus the stock's top if ``stock``.
 */
export interface blackjack_piles_Cash {
  type: "cash";
  piles: Array<number>;
  stock?: boolean;
}

/**
 * A hand was cashed: ``cards`` in the order of ``piles`` then the stock's top.
 */
export interface blackjack_piles_Cashed {
  type: "cashed";
  cards: Array<string>;
  total: number;
  piles: Array<number>;
  stock: boolean;
  hands: number;
  stock_top: string | null;
  stock_count: number;
}

/**
 * End the round (only once the stock is empty).
 */
export interface blackjack_piles_EndRound {
  type: "end_round";
}

/**
 * The game ended; ``seed`` is revealed (``None`` for a game built from a card order).
 */
export interface blackjack_piles_GameOver {
  type: "game_over";
  score: number;
  seed: string | null;
}

/**
 * Move the top card of pile ``source`` to the empty pile ``target``.
 */
export interface blackjack_piles_Move {
  type: "move";
  source: number;
  target: number;
}

/**
 * A pile's top card moved to an empty pile.
 */
export interface blackjack_piles_Moved {
  type: "moved";
  card: string;
  source: number;
  target: number;
}

/**
 * Put the stock's top card on pile ``pile`` (0-based).
 */
export interface blackjack_piles_Place {
  type: "place";
  pile: number;
}

/**
 * The stock's top card went onto a pile; ``stock_top`` is the card now showing.
 */
export interface blackjack_piles_Placed {
  type: "placed";
  card: string;
  pile: number;
  stock_top: string | null;
  stock_count: number;
}

/**
 * End the game now; the current round scores as it stands.
 */
export interface blackjack_piles_Resign {
  type: "resign";
}

/**
 * A round ended. ``ended_by``: ``"player"`` (end_round), ``"auto"`` (nothing left to play)
 * or ``"resign"``; ``advanced``: the next round starts now (a ``round_started`` follows).
 */
export interface blackjack_piles_RoundEnded {
  type: "round_ended";
  result: blackjack_piles_RoundResult;
  ended_by: "auto" | "player" | "resign";
  advanced: boolean;
}

/**
 * How a finished round went. ``passed``: the hands exceeded the cards left (a resigned
 * round never passes); the player advances when a round passes, round 7 ends the game.
 */
export interface blackjack_piles_RoundResult {
  round: number;
  hands: number;
  left: number;
  bonus: number;
  score: number;
  passed: boolean;
}

/**
 * One round's rules: pile count, cards per pile (``None`` = no cap), stock top in hands.
 */
export interface blackjack_piles_RoundRules {
  piles: number;
  cap: number | null;
  stock_in_hand: boolean;
}

/**
 * A new round started with a fresh deck.
 */
export interface blackjack_piles_RoundStarted {
  type: "round_started";
  round: number;
  rules: blackjack_piles_RoundRules;
  stock_top: string;
  stock_count: number;
}

/**
 * What the player (and any spectator) sees: everything but the stock below its top.
 */
export interface blackjack_piles_View {
  round: number;
  rules: blackjack_piles_RoundRules;
  piles: Array<Array<string>>;
  stock_top: string | null;
  stock_count: number;
  hands: number;
  left: number;
  score: number;
  results: Array<blackjack_piles_RoundResult>;
  over: boolean;
  commitment: string | null;
  seed: string | null;
}

/**
 * Deal one stock card onto each bottom pile.
 */
export interface blue_jacket_Deal {
  type: "deal";
}

/**
 * ``cards[i]`` went onto bottom pile ``i + 1``; ``stock_count`` cards remain.
 */
export interface blue_jacket_Dealt {
  type: "dealt";
  cards: Array<string>;
  stock_count: number;
}

/**
 * The game ended (``ending``: won, resigned or no_moves); the seed is revealed.
 */
export interface blue_jacket_GameOver {
  type: "game_over";
  score: number;
  won: boolean;
  ending: "no_moves" | "resigned" | "won";
  seed: string | null;
}

/**
 * Swap the single cards of row piles ``a`` and ``b``.
 */
export interface blue_jacket_Interchange {
  type: "interchange";
  a: string;
  b: string;
}

/**
 * ``card_a`` went from ``a`` to ``b`` and ``card_b`` from ``b`` to ``a``.
 */
export interface blue_jacket_Interchanged {
  type: "interchanged";
  a: string;
  b: string;
  card_a: string;
  card_b: string;
  score: number;
}

/**
 * Move the available card at ``source`` to ``target`` (location names).
 */
export interface blue_jacket_Move {
  type: "move";
  source: string;
  target: string;
}

/**
 * ``card`` went from ``source`` to ``target``; ``score`` is the score after it.
 */
export interface blue_jacket_Moved {
  type: "moved";
  card: string;
  source: string;
  target: string;
  score: number;
}

/**
 * No sequence of moves can put another card on a foundation (the score is final).
 */
export interface blue_jacket_NoProgress {
  type: "no_progress";
  score: number;
}

/**
 * End the game now with the current score.
 */
export interface blue_jacket_Resign {
  type: "resign";
}

/**
 * What the player (and any spectator) sees. Piles list their cards bottom first.
 *
 * ``rows[r][p]`` is row pile ``"r{r+1}.{p+1}"``, ``bottom[i]`` is ``"b{i+1}"`` (every card of
 * a bottom pile is face up; only the last can move). ``moves``: actions played, resign
 * excluded. ``progress``: whether some sequence of moves can still raise the score (``None``:
 * unknown or not checked).
 */
export interface blue_jacket_View {
  rows: Array<Array<Array<string>>>;
  bottom: Array<Array<string>>;
  aces: Array<string>;
  stock_count: number;
  score: number;
  can_deal: boolean;
  moves: number;
  progress: boolean | null;
  over: boolean;
  won: boolean;
  ending: "no_moves" | "resigned" | "won" | null;
  commitment: string | null;
  seed: string | null;
}
