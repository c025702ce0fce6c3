# Stand-in for postgres:16-alpine where no registry is reachable: Debian bookworm's PostgreSQL 15,
# run as the official image runs it for docker-compose.yml's `records` service: user postgres,
# data in /var/lib/postgresql/data (a volume), a cluster made on the first start from
# POSTGRES_USER, POSTGRES_PASSWORD and POSTGRES_DB (password logins over TCP), `pg_isready` on
# PATH for the health check. The records schema needs nothing newer than 15.
# Built by deploy/offline.py only when the real image is missing and cannot be pulled.
ARG BASE
FROM ${BASE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /var/lib/postgresql/data /var/run/postgresql \
 && chown postgres:postgres /var/lib/postgresql/data /var/run/postgresql \
 && chmod 700 /var/lib/postgresql/data \
 && printf '%s\n' \
    '#!/bin/sh' \
    'set -e' \
    'PGDATA=/var/lib/postgresql/data' \
    'if [ ! -s "$PGDATA/PG_VERSION" ]; then' \
    '  printf "%s\n" "$POSTGRES_PASSWORD" > /tmp/pwfile' \
    '  initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile=/tmp/pwfile -A scram-sha-256 -E UTF8 --locale C' \
    '  rm -f /tmp/pwfile' \
    '  echo "host all all 0.0.0.0/0 scram-sha-256" >> "$PGDATA/pg_hba.conf"' \
    '  pg_ctl -D "$PGDATA" -o "-c listen_addresses=" -w start' \
    '  PGPASSWORD="$POSTGRES_PASSWORD" psql -v ON_ERROR_STOP=1 -U "$POSTGRES_USER" -d postgres -c "CREATE DATABASE \"$POSTGRES_DB\"" || true' \
    '  pg_ctl -D "$PGDATA" -m fast -w stop' \
    'fi' \
    'exec postgres -D "$PGDATA" -c listen_addresses="*"' \
    > /usr/local/bin/postgres-standin && chmod 755 /usr/local/bin/postgres-standin
ENV PATH=/usr/lib/postgresql/15/bin:$PATH
VOLUME /var/lib/postgresql/data
USER postgres
EXPOSE 5432
LABEL org.blackdrez.stand-in="postgres:16-alpine from Debian bookworm's postgresql-15"
CMD ["postgres-standin"]
