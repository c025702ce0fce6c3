"""BlackDrez Server: the pure game engines (games/) and the runtime that carries them."""
