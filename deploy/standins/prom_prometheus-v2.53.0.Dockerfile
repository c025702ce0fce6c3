# Stand-in for prom/prometheus:v2.53.0 where no registry is reachable: Debian bookworm's
# prometheus (2.42), started as the official image starts it (its configuration at
# /etc/prometheus/prometheus.yml, data in /prometheus, port 9090). Built by deploy/offline.py
# only when the real image is missing and cannot be pulled. Grafana has no Debian package: the
# monitoring profile's grafana service needs the real image.
ARG BASE
FROM ${BASE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends prometheus \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /prometheus && chown prometheus:prometheus /prometheus
USER prometheus
EXPOSE 9090
LABEL org.blackdrez.stand-in="prom/prometheus:v2.53.0 from Debian bookworm's prometheus"
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
