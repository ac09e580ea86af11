# syntax=docker/dockerfile:1
# voxd, CPU image (docs/deploy.md), for linux/amd64 and linux/arm64.
#   docker build -t voxd .
#   docker run --rm -p 8000:8000 -v voxd-models:/models voxd
#   docker buildx build --platform linux/amd64,linux/arm64 -t voxd .     (both; the host runs arm64 programs by qemu)
#   (podman 4.3 sets no BUILDPLATFORM: add --build-arg BUILDPLATFORM=linux/amd64, the building machine's)
#
# Node.js 22 LTS comes from the official node:22-bookworm-slim image (Debian 12 with the upstream Node binaries in
# /usr/local): Debian 12's own nodejs package is 18, older than voxd's floor (20.17). Both stages start from it, so
# the addon is built and run on the same Debian 12 libraries. The addon is N-API: any Node line >= 20.17 loads it.
ARG NODE_IMAGE=node:22-bookworm-slim

# ---- build: npm ci builds the native addon from source (scripts/install.mjs), the TypeScript, the web interface and
# the shipped VAD model (`prepare`); then the dev dependencies are pruned. It runs on the building machine's own
# platform (BUILDPLATFORM): an image for another architecture (TARGETARCH) gets that architecture's platform addon,
# cross-compiled (`npm run prebuild -- --arch`, scripts/cross.mjs), in minutes rather than the hours a compile under
# emulation takes ----
FROM --platform=$BUILDPLATFORM ${NODE_IMAGE} AS build
ARG TARGETARCH
# Behind a proxy that inspects TLS: its CA certificate, mounted for the build, for npm and Node's downloads
# (--build-arg NODE_EXTRA_CA_CERTS=/path plus a volume there); the image keeps nothing of it
ARG NODE_EXTRA_CA_CERTS
# The build packages of scripts/system-deps.mjs (SYSTEM_DEPS; test/unit/deploy.test.ts checks that every one is
# here). npm ci would install missing ones itself, as root on Debian, but a layer of their own is cached.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        cmake gcc g++ ninja-build make git pkg-config binutils xz-utils bison patch autoconf automake libtool ca-certificates \
        libavformat-dev libavcodec-dev libswresample-dev libavutil-dev \
        libpocketsphinx-dev libpocketsphinx3 pocketsphinx-en-us flite1-dev libflite1 \
        libespeak-ng-dev espeak-ng-data \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY . .
# PORTABLE=1 (the default) ships the portable addon of `npm run prebuild` (no -march=native; x86-64-v3, i.e. AVX2,
# on x86-64), which runs on any node of a cluster; the source build of `npm ci` is tuned to the CPU that built the
# image (-march=native) and would die with SIGILL on an older CPU. It costs a second compile. PORTABLE=0 ships the
# tuned build instead: for an image built on the machine (or the CPU family) it runs on.
# For another architecture the build is the portable one whatever PORTABLE says, and npm ci builds no addon for this
# machine's (--ignore-scripts, then voxd's own `prepare`).
ARG PORTABLE=1
RUN --mount=type=cache,target=/root/.npm --mount=type=cache,target=/root/.cache/voxd \
    arch="$(node -p "({ amd64: 'x64', arm64: 'arm64' })['${TARGETARCH}'] ?? process.arch")" \
    && if [ "$arch" != "$(node -p process.arch)" ]; then PORTABLE=1 && npm ci --ignore-scripts && npm run prepare; else npm ci; fi \
    && if [ "$PORTABLE" = 1 ]; then npm run prebuild -- --arch "$arch" && addon="$(ls prebuilds/linux-"$arch"/*.node)"; else addon=build/Release/voxd.node; fi \
    && cp "$addon" /tmp/voxd.node \
    && rm -rf build prebuilds third_party \
    && mkdir -p build/Release && mv /tmp/voxd.node build/Release/voxd.node \
    && npm prune --omit=dev

# ---- runtime: Debian 12's run-time libraries only, the built app, a non-root user; the image's own platform (named,
# for podman 4.3, which otherwise resolves a multi-architecture base image here as it did for the build stage) ----
FROM --platform=$TARGETPLATFORM ${NODE_IMAGE} AS runtime
# FFmpeg 5.1's libraries (linked by the addon), and the libraries and data the built-in models open at run time:
# pocketsphinx (`sphinx`) and flite (`flite`); espeak-ng's data (Kokoro's text frontend; the library is linked in)
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libavformat59 libavcodec59 libswresample4 libavutil57 \
        libpocketsphinx3 pocketsphinx-en-us libflite1 espeak-ng-data \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 voxd \
    && useradd --system --uid 10001 --gid 10001 --home-dir /app --no-create-home --shell /usr/sbin/nologin voxd \
    && mkdir -p /models /app/logs \
    && chown 10001:10001 /models /app/logs
WORKDIR /app
# Owned by root, so the server cannot change its own code; it writes only the logs and the hub cache
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist/src ./dist/src
COPY --from=build /app/dist/models ./dist/models
COPY --from=build /app/ui/dist ./ui/dist
COPY --from=build /app/build/Release/voxd.node ./build/Release/voxd.node
# HF_HOME: the hub cache (downloaded models) is /models/hub; mount a volume there so models survive the container
ENV NODE_ENV=production \
    HF_HOME=/models
VOLUME ["/models"]
USER 10001:10001
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["node", "-e", "fetch('http://127.0.0.1:8000/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# voxd drains on SIGTERM (docs/configuration.md#shutdown); node is PID 1 and handles it itself
STOPSIGNAL SIGTERM
CMD ["node", "dist/src/cli.js", "serve", "--host", "0.0.0.0"]
