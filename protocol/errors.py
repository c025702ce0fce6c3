"""Error codes and WebSocket close codes: the stable vocabulary of failure on the wire."""

from __future__ import annotations

import enum


class ErrorCode(enum.StrEnum):
    """Every reason a request can fail. Sent as ``{"type": "error", "code": ...}``."""

    # The frame itself
    BAD_FRAME = "bad_frame"
    """The frame is not valid JSON (text frames) or MessagePack (binary frames)."""
    UNKNOWN_TYPE = "unknown_type"
    """The ``type`` tag names no message of this protocol version."""
    BAD_MESSAGE = "bad_message"
    """Valid JSON / MessagePack, but not a message: not an object, a field missing, of the
    wrong type or out of range."""
    """A field is missing, of the wrong type, or out of range."""
    # Handshake and identity
    UNSUPPORTED_VERSION = "unsupported_version"
    """None of the client's versions is spoken here; the reply lists the supported ones."""
    HELLO_REQUIRED = "hello_required"
    """The first message of a connection must be ``hello``."""
    ALREADY_GREETED = "already_greeted"
    """``hello`` was sent twice on one connection."""
    BAD_TOKEN = "bad_token"
    """The session token is forged, malformed, expired or ended by ``logout``, or a guest's
    token for an identity since claimed, or an account token revoked by
    ``sign_out_everywhere``."""
    # Accounts
    BAD_LOGIN = "bad_login"
    """``sign_in``: wrong name or password (which one is not said)."""
    BAD_NAME = "bad_name"
    WEAK_PASSWORD = "weak_password"
    """A password is 8 to 1024 characters."""
    NAME_TAKEN = "name_taken"
    """Another account holds that name (names compare case-folded)."""
    ALREADY_CLAIMED = "already_claimed"
    """This identity already has an account."""
    # Lobby and tables
    NOT_FOUND = "not_found"
    """No such table, session or game."""
    TABLE_FULL = "table_full"
    SEAT_TAKEN = "seat_taken"
    ALREADY_SEATED = "already_seated"
    NOT_SEATED = "not_seated"
    """The request needs a seat at that table and the player has none."""
    NOT_HOST = "not_host"
    """Only the table's host may do that."""
    INVITE_REQUIRED = "invite_required"
    """A private table needs its invite code."""
    GAME_RUNNING = "game_running"
    """Not possible while a round is being played."""
    NOT_ENOUGH_PLAYERS = "not_enough_players"
    TOO_MANY_SESSIONS = "too_many_sessions"
    """The player already holds the most open solitaire sessions allowed; leave one first."""
    NOT_A_SOLITAIRE = "not_a_solitaire"
    """Hints and undo are for solitaire sessions only."""
    NOTHING_TO_UNDO = "nothing_to_undo"
    """No move since the last card was revealed: nothing can be taken back."""
    CHAT_CLOSED = "chat_closed"
    """Spectators may not write in this table's chat (the host's choice, ``spectator_chat``)."""
    REMOVED = "removed"
    """The host sent this player away from the table: they may not watch or write there."""
    SEALED = "sealed"
    """A daily deal's seed or record stays sealed until its UTC day has ended."""
    CHALLENGE_REFUSED = "challenge_refused"
    """The player you challenge does not take challenges from you (they block you)."""
    ARENA_OVER = "arena_over"
    """The arena has ended: nobody is paired there any more (its standings stay)."""
    # Game actions (the engines' rejection reasons)
    NOT_YOUR_TURN = "not_your_turn"
    ILLEGAL_ACTION = "illegal_action"
    GAME_OVER = "game_over"
    NOT_IN_ROUND = "not_in_round"
    BAD_ACTION = "bad_action"
    # Limits and the server
    RATE_LIMITED = "rate_limited"
    UNAVAILABLE = "unavailable"
    """A service the request needs (the store) cannot be reached; nothing was changed."""
    MOVING = "moving"
    """The table exists but is moving between nodes (its node went away, or another node is
    taking it over); nothing was changed. Retryable: send the same request again after a short
    wait (about 0.1 s, backing off to a second or two) until it gets a real answer. Never means
    the table is gone: that is ``not_found``."""
    SHUTTING_DOWN = "shutting_down"
    INTERNAL = "internal"


class CloseCode(enum.IntEnum):
    """WebSocket close codes the server uses. 1xxx are RFC 6455's; 4xxx are ours."""

    NORMAL = 1000
    GOING_AWAY = 1001
    """The server is shutting down; reconnect (to any node) with the same token."""
    PROTOCOL_ERROR = 1002
    """A frame broke the WebSocket protocol (sent by the WebSocket layer, like 1007 and 1009)."""
    INVALID_DATA = 1007
    """A text frame was not valid UTF-8."""
    POLICY_VIOLATION = 1008
    """Flooding: the client exceeded the message rate limit."""
    MESSAGE_TOO_BIG = 1009
    """A frame exceeded ``limits.max_frame_bytes``."""
    INTERNAL_ERROR = 1011
    """Keepalive: the client did not answer the server's WebSocket ping in time (sent by the
    WebSocket layer)."""
    HANDSHAKE_FAILED = 4000
    """The first message was not a valid ``hello``."""
    UNSUPPORTED_VERSION = 4001
    """No common protocol version; the error before the close lists the supported ones."""
    BAD_TOKEN = 4002
    """The session token in ``hello`` was rejected."""
    SLOW_CONSUMER = 4003
    """The client fell too far behind reading; reconnect and resync."""
    REPLACED = 4004
    """The same player connected again elsewhere; this older connection is closed."""
    IDLE_TIMEOUT = 4005
    """Nothing was received for too long."""
    TOO_MANY_CONNECTIONS = 4006
    """The client's address already holds the most connections a node allows."""
    SIGNED_OUT = 4007
    """The account signed out everywhere (``sign_out_everywhere``, from another connection): this
    connection's token is refused from now on; sign in again."""
    NO_ANSWER = 4008
    """An action (``act``, ``undo``, ``add_bots``) was forwarded to the node hosting its table
    and no answer came in time: it may or may not have been carried out (an error would say it
    was not, and the client would play it again); reconnect and resync."""
    OUT_OF_STEP = 4009
    """This node lost track of a table the client watches (the table's host could not be
    reached to bring the client up to date, as in a network cut): reconnect, to any node, and
    resync."""
