#!/usr/bin/env bash
# Builds Tenantry and runs the portal on the embedded default: SQLite under ./data/, the
# simulated fleet, demo data seeded on first start and demo sign-in on.
# Open http://127.0.0.1:3000 when it says "listening". Safe to run again.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
bootstrap_build
say "building (the first build takes a few minutes)"
cargo leptos build --split
export DATABASE_URL="${DATABASE_URL:-sqlite://data/tenantry.db}"
export TENANTRY_DEMO="${TENANTRY_DEMO:-1}"
export TENANTRY_FLEET="${TENANTRY_FLEET:-sim}"
say "starting the portal on http://${TENANTRY_ADDR:-127.0.0.1:3000}"
exec target/debug/tenantry serve
