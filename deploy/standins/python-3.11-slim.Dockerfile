# Stand-in for python:3.11-slim where no registry is reachable: Debian bookworm's Python 3.11
# (3.11.2) with pip, laid out like the official image for what the project's Dockerfile uses:
# `python` and `pip` on PATH, pip allowed to install system-wide, `useradd`.
# Built by deploy/offline.py only when the real image is missing and cannot be pulled.
ARG BASE
FROM ${BASE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-pip python-is-python3 \
      ca-certificates \
 && rm -f /usr/lib/python3*/EXTERNALLY-MANAGED \
 && rm -rf /var/lib/apt/lists/*
ENV LANG=C.UTF-8
LABEL org.blackdrez.stand-in="python:3.11-slim from Debian bookworm's python3"
CMD ["python3"]
