# The images of `make images`, for those who build with Docker. Both build
# the binaries with hack/images (one go build, static, no paths or VCS stamps)
# and put each alone in an empty image that runs as 65532:65532, so both
# give the same files:
#   docker build --target manager    -t ghcr.io/posture-dev/posture-manager:v0.1.0 .
#   docker build --target mcp-server -t ghcr.io/posture-dev/posture-mcp-server:v0.1.0 .
#   docker build --target postctl    -t ghcr.io/posture-dev/posture-postctl:v0.1.0 .
# Worker Jobs run the manager image (manager worker).
FROM golang:1.26.8 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN go run ./hack/images -binaries /out

# Non-root, no shell; nothing is written but the volumes the chart mounts,
# so a read-only root filesystem works.
FROM scratch AS mcp-server
COPY --from=build /out/mcp-server /mcp-server
USER 65532:65532
ENTRYPOINT ["/mcp-server"]

FROM scratch AS postctl
COPY --from=build /out/postctl /postctl
USER 65532:65532
ENTRYPOINT ["/postctl"]

FROM scratch AS manager
COPY --from=build /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
