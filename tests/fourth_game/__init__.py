"""Higher or Lower, the fourth game: a folder outside ``games/`` registered with one line.

``BLACKDREZ_GAMES=tests.fourth_game`` in a process's environment registers it (see
:mod:`blackdrez.games`); ``test_end_to_end.py`` plays it through a real server started so, and
``tests/browser/test_generic_game.py`` in the browser. ``SPEC`` is what the registry lists.
"""

from tests.fourth_game.table import HigherOrLowerSpec

SPEC = HigherOrLowerSpec()
