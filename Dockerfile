# syntax=docker/dockerfile:1
#
# Titan container image: a static titan binary on an empty base, run as a non-root user,
# data in the /var/lib/titan volume.
#
#   docker build -t titan --build-arg VERSION=1.2.3 --build-arg COMMIT=$(git rev-parse HEAD) .
#   docker run -p 61613:61613 -p 7777:7777 -v titan-data:/var/lib/titan titan
#
# The first start creates /var/lib/titan/users.yml with user admin (every permission) and
# prints its one-time password (docker logs); set TITAN_INIT_PASSWORD (and TITAN_INIT_USER)
# to choose them, or mount your own users file at TITAN_USERS_FILE. Clients arriving through
# the port mapping log in; the monitor API and console listen on every interface of the
# container and ask for the same users' credentials (HTTP Basic).
#   docker run titan --store memory --log-format json      # arguments go to `titan serve`
#
# The build downloads nothing but Go modules, and those only from the Go module proxy
# (GOPROXY has no ",direct" fallback and GOTOOLCHAIN=local forbids toolchain downloads).

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
ARG VERSION=""
ARG COMMIT=""
ENV CGO_ENABLED=0 \
    GOTOOLCHAIN=local \
    GOPROXY=https://proxy.golang.org \
    GOFLAGS=-trimpath
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN go build -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" -o /out/titan ./cmd/titan \
 && /out/titan version \
 && mkdir -p /out/rootfs/var/lib/titan /out/rootfs/etc \
 && echo 'titan:x:10001:10001:Titan broker:/var/lib/titan:/sbin/nologin' > /out/rootfs/etc/passwd \
 && echo 'titan:x:10001:' > /out/rootfs/etc/group

FROM scratch
COPY --from=build /out/rootfs/etc/passwd /out/rootfs/etc/group /etc/
COPY --from=build --chown=10001:10001 /out/rootfs/var/lib/titan /var/lib/titan
COPY --from=build /out/titan /usr/local/bin/titan
COPY LICENSE /usr/share/doc/titan/LICENSE
USER 10001:10001
ENV TITAN_DATA_DIR=/var/lib/titan \
    TITAN_USERS_FILE=/var/lib/titan/users.yml \
    TITAN_INIT_USERS=true \
    TITAN_MONITOR_HOST=0.0.0.0
VOLUME ["/var/lib/titan"]
# STOMP, and the monitor API, metrics and console.
EXPOSE 61613 7777
ENTRYPOINT ["/usr/local/bin/titan", "serve"]
