# syntax=docker/dockerfile:1
#
# node-maintenance container image: admission webhook server + controller.
#
#   docker build -t node-maintenance:dev .
#
# Two stages: the release binary is built with the locked dependency versions, then copied
# alone into a distroless image (glibc + libgcc, no shell) that runs as uid/gid 65532.
# The builder is Debian bookworm, like the runtime (cc-debian12), so glibc matches.

FROM rust:1-bookworm AS builder
WORKDIR /src
# The sources (.dockerignore keeps target/, .git/, charts/, certs/ ... out).
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin node-maintenance \
    && install -D -m 0755 target/release/node-maintenance /out/node-maintenance

FROM gcr.io/distroless/cc-debian12:nonroot
LABEL org.opencontainers.image.title="node-maintenance" \
      org.opencontainers.image.description="KEP-4212 Declarative Node Maintenance: admission webhook and controller" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=builder /out/node-maintenance /node-maintenance
# 8443: HTTPS webhooks, /healthz, /readyz. 8080: plain-HTTP /metrics.
EXPOSE 8443 8080
USER 65532:65532
ENTRYPOINT ["/node-maintenance"]
