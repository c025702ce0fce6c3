"""``python -m tools.loadtest``: the load tool's command line (also ``blackdrez loadtest``)."""

import sys

from tools.loadtest.cli import main

sys.exit(main())
