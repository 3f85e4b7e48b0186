# Dockerfile - the three paygw programs in one small image, plus a one-shot migration image.
#
#   docker build -t paygw .                    # runtime image: payments-api (default),
#                                              #   payments-relay, payments-worker
#   docker build --target migrate -t paygw-migrate .
#
# compose.yaml builds both and runs each program with its own command.

# ---- build: Debian 12 toolchain and -dev packages; the tests are not built here ----------------
FROM debian:12 AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential meson ninja-build pkg-config \
      libmicrohttpd-dev librabbitmq-dev libpq-dev libjansson-dev libsodium-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY meson.build meson_options.txt ./
COPY shared/ shared/
COPY api/ api/
COPY worker/ worker/
RUN meson setup /build --buildtype=release -Dtests=false \
 && meson compile -C /build \
 && install -D -m 0755 -t /out \
      /build/api/payments-api /build/worker/payments-relay /build/worker/payments-worker

# ---- migrate: scripts/migrate needs bash and psql; the PostgreSQL image has both --------------
FROM postgres:17 AS migrate
COPY scripts/lib.sh scripts/migrate /paygw/scripts/
COPY sql/ /paygw/sql/
USER postgres
WORKDIR /paygw
ENTRYPOINT []
CMD ["/paygw/scripts/migrate"]

# ---- runtime: only the shared libraries, curl for health checks, and a non-root user ----------
FROM debian:12-slim AS runtime
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libmicrohttpd12 librabbitmq4 libpq5 libjansson4 libsodium23 ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 paygw \
 && useradd --system --uid 10001 --gid paygw --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin paygw
COPY --from=build /out/ /usr/local/bin/
USER paygw:paygw
# Inside a container the API must listen beyond loopback; the relay and worker serve health
# and metrics only when METRICS_LISTEN is set (compose.yaml sets it).
ENV API_LISTEN=0.0.0.0:8080 \
    LOG_FORMAT=json
EXPOSE 8080
# SIGTERM: each program finishes what is in flight and exits 0 within 10 s.
STOPSIGNAL SIGTERM
CMD ["payments-api"]
