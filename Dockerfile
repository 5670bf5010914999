# One image, both binaries: the manager (/manager, the entrypoint) and the admission proxy
# (/herdgate-proxy, which the operator runs as the proxy's command).
#   make docker-build IMG=<registry>/herdgate:<tag>
FROM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY admission/ admission/
COPY controllers/ controllers/
COPY internal/ internal/
COPY cmd/ cmd/
ARG TARGETOS=linux
ARG TARGETARCH=amd64
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -ldflags="-s -w" -o /out/manager ./cmd/manager \
 && CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -ldflags="-s -w" -o /out/herdgate-proxy ./cmd/herdgate-proxy

# distroless/static: no shell, no package manager; CA certificates for rediss:// and https upstreams.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/manager /manager
COPY --from=build /out/herdgate-proxy /herdgate-proxy
USER 65532:65532
ENTRYPOINT ["/manager"]
