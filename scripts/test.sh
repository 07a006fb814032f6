#!/usr/bin/env bash
# Runs every check and test: formatting and lints, the Rust tests on SQLite and PostgreSQL, and
# the Playwright end-to-end suite in Debian's Chromium. Installs and starts what it needs.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
bootstrap_test

say "formatting"
cargo fmt --all --check
leptosfmt --check app/src >/dev/null

say "lints"
cargo clippy --all-targets --locked -- -D warnings
# No two modules of a crate import each other, directly or round a loop (docs/ARCHITECTURE.md).
python3 scripts/module-cycles.py domain/src engine/src app/src frontend/src server/src

say "dropping test databases left by earlier runs"
psql "$TENANTRY_TEST_POSTGRES_URL" -Atqc \
  "select 'drop database if exists \"' || datname || '\";' from pg_database where datname like 'tenantry_test%'" \
  | psql "$TENANTRY_TEST_POSTGRES_URL" -q >/dev/null
rm -rf "${TMPDIR:-/tmp}/tenantry-tests"

say "starting Slurm (the Slurm fleet's tests run against it)"
scripts/slurm.sh start
eval "$(scripts/slurm.sh env)"

say "Rust tests (SQLite, PostgreSQL and Slurm)"
cargo test --locked

say "building the site for the end-to-end tests"
cargo leptos build --split

say "end-to-end tests (Playwright, Chromium)"
(cd end2end && npx playwright test)
