# opsbot: a static binary on an empty (scratch) image, non-root. The binaries are built outside the image, by
# .ci/build-release (the release workflow runs it), so the image holds nothing but opsbot, the CA bundle, an empty
# /tmp (for `opsbot demo`) and /data:
#   .ci/build-release v1.2.0 && docker build --build-arg VERSION=v1.2.0 -t opsbot .
#   docker run -p 8080:8080 -v opsbot-state:/data -v ./opsbot.yaml:/etc/opsbot/opsbot.yaml:ro \
#     -e OPSBOT_WEBHOOK_SECRET=... -e GITHUB_TOKEN=... -e OPSBOT_GATE_TOKENS=... -e OPSBOT_ADMIN_TOKENS=... opsbot
# It listens on 0.0.0.0:8080 (OPSBOT_LISTEN; the health check reads the same variable) and keeps its database in
# /data. A bind mount for /data must be writable by uid 65532: `chown 65532:65532 DIR` on the host first.
# Mount your configuration over /etc/opsbot/opsbot.yaml (the image holds the example, in dry-run). HEALTHCHECK is a
# Docker instruction: where it is ignored (an OCI-format image, Kubernetes) probe with `/opsbot healthcheck`, or
# /healthz and /readyz over HTTP (deploy/kubernetes).
# TARGETARCH is the image's architecture: BuildKit (docker buildx, and docker build since Docker 23) sets it from
# --platform; the legacy builder takes the default, amd64, or --build-arg TARGETARCH=arm64.
FROM scratch
ARG TARGETARCH=amd64
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="opsbot" org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/SemiAnalysisAI/opsbot" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY dist/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY dist/opsbot-linux-${TARGETARCH} /opsbot
COPY opsbot.example.yaml /etc/opsbot/opsbot.yaml
COPY --chown=65532:65532 dist/tmp /tmp
COPY --chown=65532:65532 dist/tmp /data
ENV OPSBOT_LISTEN=0.0.0.0:8080 OPSBOT_STATE_PATH=/data/opsbot.db TMPDIR=/tmp
USER 65532:65532
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s CMD ["/opsbot", "healthcheck"]
ENTRYPOINT ["/opsbot"]
CMD ["serve", "--config", "/etc/opsbot/opsbot.yaml"]
