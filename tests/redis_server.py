"""Where the Redis launcher used to live: it is :mod:`blackdrez.server.testing.redis_server` now.

Kept so that tests written against the old path (on branches not merged yet) still import.
"""

from blackdrez.server.testing.redis_server import (
    RedisServer,
    answers_ping,
    find_redis_server,
    free_port,
)

__all__ = ["RedisServer", "answers_ping", "find_redis_server", "free_port"]
