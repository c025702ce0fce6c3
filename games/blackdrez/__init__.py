"""The game's folder: ``rules`` (the pure engine), ``bots`` (reference bots), ``table`` (glue).

``SPEC`` is what the registry (:data:`games.GAMES`) lists for this game.
"""

from blackdrez.games.blackdrez.table import BlackDrezSpec

SPEC = BlackDrezSpec()
