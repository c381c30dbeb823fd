#!/bin/sh
# As the official image's entrypoint: redis-server without a config file would refuse every client but localhost.
set -eu
if [ "${1:-}" = redis-server ]; then
    shift
    exec redis-server --protected-mode no "$@"
fi
exec "$@"
