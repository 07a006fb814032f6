#!/usr/bin/env bash
# Retakes the README's screenshot (docs/images/calendar.png): builds the site, starts the demo
# portal on a fresh SQLite database and photographs the calendar in Chromium
# (end2end/measure/screenshot.spec.ts). Not part of the test suite.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
bootstrap_test
say "building the site"
cargo leptos build --split
cd end2end
TENANTRY_MEASURE_BIN=../target/debug/tenantry npx playwright test -c measure.config.ts screenshot
