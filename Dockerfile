# opsbot: a static binary on a minimal, non-root image.
#   docker build -t opsbot .
#   docker run -p 8080:8080 -v opsbot-state:/data \
#     -e OPSBOT_WEBHOOK_SECRET=... -e GITHUB_TOKEN=... -e OPSBOT_GATE_TOKENS=... -e OPSBOT_ADMIN_TOKENS=... opsbot
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/opsbot ./cmd/opsbot \
 && mkdir -p /out/data

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/
COPY --from=build /out/opsbot /opsbot
COPY opsbot.example.yaml /etc/opsbot/opsbot.yaml
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s CMD ["/opsbot", "healthcheck", "--url", "http://127.0.0.1:8080/healthz"]
ENTRYPOINT ["/opsbot"]
CMD ["serve", "--config", "/etc/opsbot/opsbot.yaml", "--listen", "0.0.0.0:8080", "--state", "/data/opsbot.db"]
