# Redis from Debian's redis-server (7.0), run as the official image runs it: as user redis in /data, protected
# mode off when the command is redis-server (its network is the compose network, not the host's).
ARG DEBIAN_IMAGE=agentsearch-local/debian:bookworm
FROM ${DEBIAN_IMAGE}
RUN apt-get update \
    && apt-get install -y --no-install-recommends redis-server \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /data && chown redis:redis /data
COPY redis-entrypoint.sh /usr/local/bin/redis-entrypoint
USER redis
WORKDIR /data
EXPOSE 6379
ENTRYPOINT ["redis-entrypoint"]
CMD ["redis-server"]
