# Tenantry: build with the same steps as scripts/run.sh (release profile), run `tenantry serve`.
FROM rust:1.95-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends nodejs npm && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY scripts/bootstrap.sh scripts/bootstrap.sh
COPY package.json package-lock.json ./
RUN bash -c 'source scripts/bootstrap.sh && bootstrap_build'
COPY . .
RUN cargo leptos build --release --split

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/* \
    && useradd --system --create-home --home-dir /app tenantry
WORKDIR /app
COPY --from=build /src/target/release/tenantry /usr/local/bin/tenantry
COPY --from=build /src/target/site /app/site
USER tenantry
ENV LEPTOS_SITE_ROOT=/app/site \
    TENANTRY_ADDR=0.0.0.0:3000 \
    DATABASE_URL=sqlite:///app/data/tenantry.db
EXPOSE 3000
HEALTHCHECK --interval=30s --timeout=3s CMD ["/bin/sh", "-c", "exec 3<>/dev/tcp/127.0.0.1/3000"]
ENTRYPOINT ["tenantry"]
CMD ["serve"]
