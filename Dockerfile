# apigate, built from this repository. Used by docker-compose.yml; also fine on its own:
#   docker build -t apigate . && docker run --rm apigate --help
FROM rust:1.95-bookworm AS build
# aws-lc-rs (TLS to Postgres and upstreams) builds C code.
RUN apt-get update \
 && apt-get install -y --no-install-recommends cmake clang \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
COPY src ./src
COPY migrations ./migrations
COPY openapi ./openapi
COPY examples ./examples
COPY tests ./tests
COPY benches ./benches
# The built-in embedding model (8 MB), compiled into the binary.
COPY models/static-api ./models/static-api
RUN cargo build --release --locked --bin apigate

FROM debian:bookworm-slim
# curl is only for the health check.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin apigate
COPY --from=build /src/target/release/apigate /usr/local/bin/apigate
# The embedding model is in the binary (hybrid ranking by default; `--ranker lexical` opts
# out). An encoder given with --embedding-model caches its vectors in /var/cache/apigate
# (mount a volume there to keep them across containers).
RUN mkdir -p /var/cache/apigate && chown apigate /var/cache/apigate
USER apigate
ENV RUST_LOG=info APIGATE_CACHE_DIR=/var/cache/apigate
EXPOSE 3001
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
  CMD curl -fsS http://127.0.0.1:3001/health || exit 1
ENTRYPOINT ["apigate"]
CMD ["--help"]
