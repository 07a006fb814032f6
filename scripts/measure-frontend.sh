#!/usr/bin/env bash
# Measures the front end's weight: builds the release site split per route (`cargo leptos build
# --release --split`), lists the wasm files it made, then cold-loads pages in Chromium
# (end2end/measure/cold-load.spec.ts) and prints bytes transferred and time to interactive.
# Figures go to docs/PERFORMANCE.md, "Build and size". Not part of the test suite.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
# Chromium and Playwright come with the test tools.
bootstrap_test
say "building the release site, split per route"
cargo leptos build --release --split
say "wasm files (raw, gzip -9)"
for file in target/site/pkg/*.wasm; do
  printf '%8s KB %8s KB  %s\n' "$(($(stat -c %s "$file") / 1024))" "$(($(gzip -9c "$file" | wc -c) / 1024))" "${file##*/}"
done
say "cold loads in Chromium"
cd end2end
npx playwright test -c measure.config.ts
