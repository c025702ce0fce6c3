"""``python -m blackdrez.tools.loadtest``: the load tool's command line (also ``blackdrez
loadtest``)."""

import sys

from blackdrez.tools.loadtest.cli import main

sys.exit(main())
