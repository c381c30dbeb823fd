# The Python base of the agentsearch image, from Debian's packages: `--build-arg PYTHON_IMAGE=` this image.
ARG DEBIAN_IMAGE=agentsearch-local/debian:bookworm
FROM ${DEBIAN_IMAGE}
COPY certs/ /usr/local/share/ca-certificates/
# The extra certificates join Debian's bundle, which pip and apt inside later builds then trust (PIP_CERT: pip
# otherwise reads only its own bundle).
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
    && rm -f /usr/local/share/ca-certificates/README.md && update-ca-certificates \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    LANG=C.UTF-8
CMD ["python3"]
