# syntax=docker/dockerfile:1
# Two stages: the build stage installs everything and compiles (npm ci runs `prepare` = `npm run build`); the runtime
# stage holds production dependencies and the compiled output only, runs as the unprivileged `node` user, and is
# health-checked on /api/health. `docker build -t atrium .` then see docker-compose.yml and docs/operations.md.

FROM node:22-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# Dependencies first (cached while the lockfile is unchanged); the compile runs once the sources are in.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY . .
# The one script of ours that install runs (`postinstall`): the patched shard assignment (patches/, docs/operations.md).
RUN npx patch-package --error-on-fail && npm run build

FROM node:22-bookworm-slim AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    DATA_DIR=/data
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: `prepare` would compile, and this stage has no compiler (and needs none: dist/ comes built).
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force \
 && mkdir -p /data \
 && chown node:node /data
# The patched library files come from the build stage (patch-package is a development dependency).
COPY --from=build /app/node_modules/effect/dist ./node_modules/effect/dist
COPY --from=build --chown=node:node /app/dist ./dist
COPY --from=build --chown=node:node /app/web/dist ./web/dist
USER node
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.PORT}/api/health`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# node itself is PID 1 (no npm in between), so SIGTERM reaches the platform, which drains and exits (SHUTDOWN_GRACE).
STOPSIGNAL SIGTERM
CMD ["node", "dist/main.js"]
