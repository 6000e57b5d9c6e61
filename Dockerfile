# syntax=docker/dockerfile:1
# The undolog binary alone, on a distroless base, as a user without privileges.
#   docker build -t undolog .
#   docker run -p 8080:8080 undolog serve --listen 0.0.0.0:8080   (needs an API key or [oauth]:
#   open mode never listens beyond loopback; see deploy/compose.yaml and docs/OPERATIONS.md)

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p undolog-cli \
 && install -m 0755 target/release/undolog /undolog

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /undolog /usr/local/bin/undolog
USER nonroot:nonroot
# The embedded store's default file (sqlite://undolog.db) lands in the user's own directory.
WORKDIR /home/nonroot
ENV UNDOLOG_LISTEN=0.0.0.0:8080
EXPOSE 8080 9464
ENTRYPOINT ["/usr/local/bin/undolog"]
CMD ["serve", "--log-format", "json"]
