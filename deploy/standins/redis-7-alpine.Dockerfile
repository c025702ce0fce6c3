# Stand-in for redis:7-alpine where no registry is reachable: Debian bookworm's Redis 7.0, run as
# the official image runs it (user redis, working directory /data, `redis-server` as the command,
# `redis-cli` for health checks). One difference stays: the official image compiles protected mode
# off, Debian leaves it on, so docker-compose.yml passes --protected-mode no explicitly.
# Built by deploy/offline.py only when the real image is missing and cannot be pulled.
ARG BASE
FROM ${BASE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends redis-server \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /data && chown redis:redis /data
WORKDIR /data
VOLUME /data
USER redis
EXPOSE 6379
LABEL org.blackdrez.stand-in="redis:7-alpine from Debian bookworm's redis-server"
CMD ["redis-server"]
