# capdeck as a container image: a static musl build in a scratch image, run as a non-root user.
#
#   docker build --build-arg CAPDECK_GIT_COMMIT=$(git rev-parse --short=12 HEAD) -t ghcr.io/capdeck/capdeck:0.1.0 .
#   docker push ghcr.io/capdeck/capdeck:0.1.0      # or your registry: capdeck manifests --image IMAGE
#
# The image holds the binary only; `capdeck --daemon` is what the Deployment of `capdeck manifests` runs.
FROM rust:1-bookworm AS build
RUN rustup target add x86_64-unknown-linux-musl \
 && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq musl-tools >/dev/null
WORKDIR /src
# .git is not copied: the commit `capdeck version` reports comes from this argument.
ARG CAPDECK_GIT_COMMIT=unknown
ENV CAPDECK_GIT_COMMIT=$CAPDECK_GIT_COMMIT
COPY . .
# The dist profile (Cargo.toml): the release profile with fat LTO and one codegen unit. Without
# the default feature `sandbox`: the daemon never runs the embedded API server (README).
RUN cargo build --profile dist --locked --no-default-features --target x86_64-unknown-linux-musl \
 && cp target/x86_64-unknown-linux-musl/dist/capdeck /capdeck

FROM scratch
# The CA bundle lets the daemon reach API servers with public certificates; in-cluster it uses the
# service account's CA.
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /capdeck /capdeck
# nobody:nogroup in distroless terms; the Deployment sets runAsNonRoot and runAsUser 65532 too.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/capdeck"]
CMD ["--daemon", "--health-addr", "0.0.0.0:8080", "-A"]
