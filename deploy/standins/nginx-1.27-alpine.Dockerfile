# Stand-in for nginx:1.27-alpine where no registry is reachable: Debian bookworm's nginx (1.22),
# run as the official image runs it (in the foreground, logs to the container's output, stopped
# gracefully with SIGQUIT). deploy/nginx.conf replaces its configuration as it does the official
# image's. Built by deploy/offline.py only when the real image is missing and cannot be pulled.
ARG BASE
FROM ${BASE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends nginx \
 && rm -rf /var/lib/apt/lists/* \
 && ln -sf /dev/stdout /var/log/nginx/access.log \
 && ln -sf /dev/stderr /var/log/nginx/error.log
EXPOSE 80
STOPSIGNAL SIGQUIT
LABEL org.blackdrez.stand-in="nginx:1.27-alpine from Debian bookworm's nginx"
CMD ["nginx", "-g", "daemon off;"]
