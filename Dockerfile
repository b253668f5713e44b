# syntax=docker/dockerfile:1
# The gateway's image: Debian's Node.js, the compiled build and its production dependencies, run as a
# non-root user on a read-only root file system (keys, limits and usage in Redis, or in the /data volume).
# Builds the same with Docker (BuildKit) and podman/buildah:
#   docker build -t model-gateway .        podman build -t model-gateway .
# Where npm needs extra certificate authorities, pass them as a build secret, never into an image layer:
#   podman build --secret id=npm_ca,src=/etc/ssl/certs/ca-certificates.crt -t model-gateway .
# Details: docs/deploy.md.

ARG BASE_IMAGE=debian:trixie-slim

# Debian's Node.js and npm, for the build only.
FROM ${BASE_IMAGE} AS node-build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nodejs npm ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json ./

# The TypeScript build (development dependencies are needed here only), then the production
# dependencies alone: `npm prune` leaves the tree `npm ci --omit=dev` would install, with no second download,
# cut down to the files the compiled gateway can load (scripts/prune-node-modules.mjs; docs/deploy.md).
FROM node-build AS build
# A build machine behind a TLS-inspecting proxy fails here with SELF_SIGNED_CERT_IN_CHAIN (or
# UNABLE_TO_GET_ISSUER_CERT_LOCALLY) unless its certificate authorities come in as the npm_ca secret.
RUN --mount=type=secret,id=npm_ca \
    if [ -s /run/secrets/npm_ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/npm_ca; fi \
 && npm ci --no-audit --no-fund --ignore-scripts \
 && rm -rf /root/.npm
# The software bill of materials of the production install (CycloneDX 1.5, from the lock file), shipped in the image.
COPY scripts/sbom.mjs scripts/
RUN node scripts/sbom.mjs --output sbom.cdx.json
COPY tsconfig.json tsconfig.build.json ./
COPY scripts/copy-runtime-files.mjs scripts/mock-upstream.ts scripts/
COPY src src
COPY providers providers
COPY tools tools
COPY mock-upstream mock-upstream
COPY web web
RUN npm run build
# Traced while the development dependencies (the tracer) are installed, pruned once they are gone.
COPY scripts/prune-node-modules.mjs scripts/
COPY bin bin
RUN node scripts/prune-node-modules.mjs trace --output /tmp/runtime-files.json \
 && npm prune --omit=dev --no-audit --no-fund --ignore-scripts \
 && node scripts/prune-node-modules.mjs prune --files /tmp/runtime-files.json \
 && rm /tmp/runtime-files.json

FROM ${BASE_IMAGE} AS runtime
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nodejs ca-certificates \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log \
 && groupadd --system --gid 10001 gateway \
 && useradd --system --uid 10001 --gid gateway --home-dir /app --no-create-home --shell /usr/sbin/nologin gateway \
 && mkdir -p /data \
 && chown gateway:gateway /data
WORKDIR /app
COPY --from=build /src/node_modules node_modules
COPY --from=build /src/dist dist
COPY --from=build /src/sbom.cdx.json ./
COPY package.json ./
COPY bin bin
COPY config config
ENV NODE_ENV=production \
    PORT=8080 \
    HOST=0.0.0.0 \
    GATEWAY_DATA_DIR=/data
# The embedded store (used without REDIS_URL) keeps its files here; the root file system may be read-only.
VOLUME ["/data"]
USER 10001:10001
EXPOSE 8080
# SIGTERM drains: no new connections, requests and streams in flight get GATEWAY_DRAIN_MS to finish,
# every usage record is stored, then the process exits 0. Give the runtime's stop timeout more than that
# (`docker stop -t`, `stop_grace_period`, `terminationGracePeriodSeconds`).
STOPSIGNAL SIGTERM
CMD ["node", "dist/src/main.js"]
# What the image is: the source revision (`--build-arg REVISION=$(git rev-parse HEAD)`; also the label
# `revision` of gateway_build_info) and where its software bill of materials is.
ARG REVISION=unknown
ENV GATEWAY_REVISION=${REVISION}
LABEL org.opencontainers.image.title="model-gateway" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="MIT" \
      dev.model-gateway.sbom="/app/sbom.cdx.json"
