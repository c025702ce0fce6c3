"""The table core: one table as plain data and synchronous code, no I/O, no asyncio.

``lifecycle`` (statuses, transitions, what each status allows), ``room`` (seats, engine, kept
events, deadlines, broadcasts), ``commands`` (the logged commands, executing one, rebuilding a
room from its log), ``records`` (what a closed table leaves) and ``assist`` (a solitaire's
hints, undo, auto-finish, daily deals and ranked results). The node (``blackdrez.server.node``)
runs these under asyncio; the tests drive them directly (``tests/server/harness.py``).
"""
