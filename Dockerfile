# The BlackDrez server image: one node per container (see docker-compose.yml).
FROM python:3.11-slim

# OFFLINE=1 installs the Python packages from deploy/wheelhouse alone, with no package index
# (deploy/offline.py fills it); unset, the wheelhouse is only an extra source beside PyPI.
ARG OFFLINE=
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml setup.py README.md ./
COPY games ./games
COPY protocol ./protocol
COPY server ./server
COPY clients ./clients
COPY tools ./tools
COPY deploy/wheelhouse /tmp/wheelhouse
# The records' default SQLite folder (blackdrez-data/ here) must be the server user's; compose
# gives the nodes a PostgreSQL instead (BLACKDREZ_DB_URL).
RUN pip install --no-cache-dir ${OFFLINE:+--no-index} --find-links /tmp/wheelhouse . \
 && rm -rf /tmp/wheelhouse && useradd --create-home blackdrez \
 && mkdir blackdrez-data && chown blackdrez blackdrez-data
USER blackdrez

EXPOSE 8765
# A generous timeout: the check starts a Python interpreter, which took more than 3 s on a loaded
# host and marked healthy nodes unhealthy.
HEALTHCHECK --interval=10s --timeout=10s CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8765/healthz', timeout=2)"
CMD ["blackdrez", "serve", "--host", "0.0.0.0", "--port", "8765"]
