"""Pure game engines: no I/O, no asyncio, deterministic from a seed and the list of actions."""
