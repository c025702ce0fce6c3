"""A node's plain HTTP, on its game port beside the WebSocket: the routes, their limits, their
responses.

* ``routes``: :class:`~blackdrez.server.http.routes.HttpRoutes`, what the port answers
  (``/healthz``, ``/metrics``, ``/games.js``, the records API, ``/admin/``, static files) and
  the gate every WebSocket handshake passes; it sees the node through the narrow
  :class:`~blackdrez.server.http.routes.Served`;
* ``limits``: client addresses (through trusted proxies) and the per-address flood limits of
  handshakes and API requests;
* ``responses``: plain responses, 429s, and the security headers of every response.

The WebSocket sessions themselves are ``blackdrez.server.session``'s.
"""
