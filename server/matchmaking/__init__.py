"""Matchmaking: players who ask for a game are grouped into tables (``pairing``: the pure core)."""
