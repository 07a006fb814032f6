#!/usr/bin/env bash
# Installs what building and testing Tenantry needs, and nothing that is already there, so it is
# safe to run again. Sourced by scripts/run.sh and scripts/test.sh.
#   bootstrap_build   Rust wasm target, cargo-leptos, wasm-bindgen-cli, Tailwind and wasm-opt (npm)
#   bootstrap_test    the above, plus leptosfmt, Chromium, Playwright, aiosmtpd (the tests' SMTP
#                     server) and a running PostgreSQL
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CARGO_LEPTOS_VERSION=0.3.10
WASM_BINDGEN_VERSION=0.2.130
LEPTOSFMT_VERSION=0.1.33

# Each step says how long the run has taken so far, so a slow CI run shows where its time went.
say() { printf '\033[1;34m==>\033[0m %s \033[2m(%dm%02ds)\033[0m\n' "$*" $((SECONDS / 60)) $((SECONDS % 60)) >&2; }
die() { printf '\033[1;31merror:\033[0m %s\n' "$*" >&2; exit 1; }

as_root() {
  if [[ $(id -u) -eq 0 ]]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    die "need root to run: $*"; fi
}

apt_install() {
  say "installing Debian packages: $*"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# Installs a Rust tool at an exact version unless `$bin --version` already reports it.
cargo_tool() {
  local bin=$1 crate=$2 version=$3; shift 3
  if command -v "$bin" >/dev/null && "$bin" --version 2>/dev/null | grep -qF "$version"; then return; fi
  say "installing $crate $version (once; takes a few minutes)"
  cargo install "$crate" --version "$version" "$@"
}

# npm ci in $1 unless its node_modules already matches its lock file.
npm_deps() {
  local dir=$1; shift
  if [[ -f $dir/node_modules/.package-lock.json && $dir/node_modules/.package-lock.json -nt $dir/package-lock.json ]]; then
    return
  fi
  say "installing npm packages in ${dir#"$ROOT"/}"
  (cd "$dir" && env "$@" npm ci --no-audit --no-fund --loglevel=error)
}

# With TENANTRY_SHARED_TARGET set (`.ci/run` sets it), a clone without a target/ builds into that
# directory, shared with the machine's other clones that opt in, so CI's fresh clone of main
# compiles only Tenantry's own crates rather than its ~600 dependencies again. Safe for clones
# of the same commit, as CI's and the checkout it was cloned from are. Cargo judges its own
# crates fresh by file times, not content, so two working copies at different commits must not
# share one: the one built last would hand the other its crates.
share_build_dir() {
  local shared=${TENANTRY_SHARED_TARGET:-}
  [[ -n $shared && ! -e $ROOT/target && ! -L $ROOT/target ]] || return 0
  say "building into $shared (TENANTRY_SHARED_TARGET), shared with this machine's other clones"
  mkdir -p "$shared"
  ln -s "$shared" "$ROOT/target"
}

bootstrap_build() {
  share_build_dir
  command -v cargo >/dev/null || die "Rust is missing: install it with rustup (https://rustup.rs)"
  command -v npm >/dev/null || die "Node.js and npm are missing: apt-get install nodejs npm"
  if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    say "adding the wasm32 target"
    rustup target add wasm32-unknown-unknown
  fi
  # no_downloads: cargo-leptos must never fetch tools from the internet at build time.
  cargo_tool cargo-leptos cargo-leptos "$CARGO_LEPTOS_VERSION" --locked --features no_downloads
  # Not --locked: its lock file pins a webpki-roots version that the registry no longer serves.
  cargo_tool wasm-bindgen wasm-bindgen-cli "$WASM_BINDGEN_VERSION"
  # Tailwind v4's CLI and binaryen's wasm-opt from npm (Debian's binaryen 108 breaks release wasm).
  npm_deps "$ROOT"
}

postgres_ready() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }

bootstrap_postgres() {
  if ! command -v pg_isready >/dev/null; then
    apt_install postgresql postgresql-contrib
  fi
  if ! postgres_ready; then
    say "starting PostgreSQL"
    local version
    version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n1)
    [[ -n $version ]] || die "PostgreSQL is installed but has no cluster under /etc/postgresql"
    as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
    for _ in $(seq 1 30); do postgres_ready && break; sleep 1; done
    postgres_ready || die "PostgreSQL did not start on 127.0.0.1:5432"
  fi
  # Tests create a database per test as this user; a fresh Debian cluster only trusts the local
  # socket, so give the postgres role a password for TCP when the default URL cannot connect.
  : "${TENANTRY_TEST_POSTGRES_URL:=postgres://postgres@127.0.0.1:5432/postgres}"
  if ! psql "$TENANTRY_TEST_POSTGRES_URL" -Atqc 'select 1' >/dev/null 2>&1; then
    as_root su postgres -c "psql -qc \"alter user postgres password 'postgres'\"" >/dev/null
    TENANTRY_TEST_POSTGRES_URL=postgres://postgres:postgres@127.0.0.1:5432/postgres
  fi
  export TENANTRY_TEST_POSTGRES_URL
}

bootstrap_test() {
  bootstrap_build
  rustup component list --installed | grep -q '^clippy' || rustup component add clippy rustfmt
  cargo_tool leptosfmt leptosfmt "$LEPTOSFMT_VERSION" --locked
  if [[ ! -x /usr/bin/chromium ]]; then apt_install chromium; fi
  npm_deps "$ROOT/end2end" PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
  # The notice tests send e-mail to a real SMTP server on loopback (scripts/smtp-sink.py).
  command -v python3 >/dev/null || apt_install python3 python3-pip
  if ! python3 -c 'import aiosmtpd' 2>/dev/null; then
    say "installing aiosmtpd (PyPI), the tests' SMTP server"
    python3 -m pip install --quiet --disable-pip-version-check aiosmtpd==1.4.6 \
      || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages aiosmtpd==1.4.6
  fi
  bootstrap_postgres
}
