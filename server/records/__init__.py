"""Players who come back: finished games, ratings, accounts and the records API.

Theory of operation
-------------------
When a game ends, the runtime builds its record (``registry.record_of``) and calls
:func:`ingest.finished_game` (pure, CPU-bound: it replays and verifies the record and reads each
player's result), then :meth:`store.RecordsStore.put_game` (one transaction, idempotent by game
id: retry it until it succeeds; ``InvalidGame`` is permanent, a database error is not). The
store keeps the games, players, per-player stats, Weng-Lin ratings (``ratings.py``) and accounts
in SQLite or PostgreSQL (``db.py``), with versioned migrations (``migrations.py``).
:class:`accounts.Accounts` claims, logs in, revokes and checks tokens; :class:`api.RecordsApi`
answers the HTTP API (``docs/api.md``) from both, as a function from request to response.

Modules, one concern each: ``db`` (the two drivers behind one interface), ``migrations``
(the schema), ``model`` (the data in and out), ``ingest`` (record -> verified game),
``ratings`` (the rating model), ``store`` (the database's reads and writes), ``accounts``
(passwords, login limits, token revocation), ``api`` (HTTP routes), ``schema`` (JSON Schema
export of the API's bodies).
"""
