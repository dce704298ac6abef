# Two images from one build: the manager (worker Jobs run the same image as
# `manager worker`) and the MCP tool server.
#   docker build --target manager    -t ghcr.io/posture-dev/posture-manager:v0.1.0 .
#   docker build --target mcp-server -t ghcr.io/posture-dev/posture-mcp-server:v0.1.0 .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/manager ./cmd/manager \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/mcp-server ./cmd/mcp-server \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/postctl ./cmd/postctl

# Non-root, no shell; only /tmp is written, so a read-only root filesystem works.
FROM gcr.io/distroless/static-debian12:nonroot AS mcp-server
COPY --from=build /out/mcp-server /mcp-server
USER 65532:65532
ENTRYPOINT ["/mcp-server"]

FROM gcr.io/distroless/static-debian12:nonroot AS manager
COPY --from=build /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
