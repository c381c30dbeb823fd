# PostgreSQL from Debian's postgresql-15, with the official image's interface: POSTGRES_DB, POSTGRES_USER and
# POSTGRES_PASSWORD make the cluster on first start, in /var/lib/postgresql/data (a volume).
ARG DEBIAN_IMAGE=agentsearch-local/debian:bookworm
FROM ${DEBIAN_IMAGE}
RUN apt-get update \
    && apt-get install -y --no-install-recommends postgresql-15 \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /var/lib/postgresql/data /run/postgresql \
    && chown -R postgres:postgres /var/lib/postgresql /run/postgresql
COPY postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint
ENV PATH=/usr/lib/postgresql/15/bin:$PATH \
    PGDATA=/var/lib/postgresql/data \
    LANG=C.UTF-8
USER postgres
EXPOSE 5432
ENTRYPOINT ["postgres-entrypoint"]
CMD ["postgres", "-c", "listen_addresses=*"]
