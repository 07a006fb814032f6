#!/usr/bin/env bash
# Makes the schema-upgrade fixture of a release: builds that commit's `tenantry` in a worktree of
# its own, seeds its demo world on SQLite and on PostgreSQL at a fixed moment, records through its
# REST API what a lead and the admin read (reservations, details, bills, statements, the usage
# report, users and tokens), and saves those answers beside a dump of each database. The
# engine's upgrade test (engine/tests/upgrade.rs) loads every fixture present, migrates it
# with the current code and checks that everything still reads back the same.
#
#   scripts/make-upgrade-fixture.sh <commit> [--at 2026-11-15T12:00:00Z] [--out DIR]
#
# Each release that adds a migration adds one fixture: run this on the release's commit and commit
# engine/tests/fixtures/release-NNNN/ (NNNN: the release's last migration).
#
# The old binary runs under libfaketime with its clock frozen at `--at` (default: noon UTC on the
# 15th of the month before the commit, so the month before and the month under way both have
# spend). Every answer is then exactly what the engine gives at that moment, and the test asks the
# current engine at the same moment. Environment: TENANTRY_TEST_POSTGRES_URL (a PostgreSQL server
# where this may create and drop a database), UPGRADE_FIXTURE_WORK (where the worktree and its
# target dir go; reuse one to skip rebuilding; `git worktree remove` it when done).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"

usage() { die "usage: scripts/make-upgrade-fixture.sh <commit> [--at RFC3339-UTC] [--out DIR]"; }
[[ $# -ge 1 ]] || usage
commit=$(git rev-parse --verify --quiet "$1^{commit}") || die "not a commit: $1"
shift
at="" out=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --at) at=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) usage ;;
  esac
done

last=$(git ls-tree --name-only "$commit" migrations/sqlite/ | sed -n 's#^migrations/sqlite/\([0-9]\{4\}\)_.*\.sql$#\1#p' | sort | tail -n1)
[[ -n $last ]] || die "$commit has no migrations under migrations/sqlite"
out=${out:-$ROOT/engine/tests/fixtures/release-$last}
if [[ -z $at ]]; then
  at=$(date -u -d "$(git show -s --format=%cs "$commit" | cut -c1-7)-15 12:00:00 UTC - 1 month" +%Y-%m-%dT%H:%M:%SZ)
fi
[[ $at =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$ ]] || die "--at must look like 2026-11-15T12:00:00Z"

command -v faketime >/dev/null || apt_install faketime
command -v sqlite3 >/dev/null || apt_install sqlite3
bootstrap_postgres
command -v pg_dump >/dev/null || die "pg_dump is missing (apt-get install postgresql-client)"

# The old release, built once per work dir.
work=${UPGRADE_FIXTURE_WORK:-${TMPDIR:-/tmp}/tenantry-release-${commit:0:12}}
mkdir -p "$work"
if [[ ! -e $work/src/.git ]]; then
  say "checking out $commit in $work/src"
  git worktree add --detach "$work/src" "$commit" >/dev/null
fi
say "building tenantry at ${commit:0:12} (its own target dir; takes a while the first time)"
(cd "$work/src" && CARGO_TARGET_DIR="$work/target" cargo build --locked -p tenantry-server --bin tenantry)
bin=$work/target/debug/tenantry

# The old binary at the frozen moment, through libfaketime's preload (not the `faketime` wrapper,
# which would stand between us and the server's pid). Only the wall clock is faked: timers and
# pools run on the monotonic clock, which must keep going.
libfaketime=$(dpkg -L libfaketime 2>/dev/null | grep -m1 '/libfaketime\.so\.1$') || die "libfaketime is missing"
frozen=(env LD_PRELOAD="$libfaketime" FAKETIME="$(date -u -d "$at" '+%Y-%m-%d %H:%M:%S')"
  FAKETIME_DONT_FAKE_MONOTONIC=1 TZ=UTC)
old() { "${frozen[@]}" "$bin" --database-url "$url" "$@"; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

pg_base=${TENANTRY_TEST_POSTGRES_URL%/*}
export PGOPTIONS="-c client_min_messages=warning"
pg_db=tenantry_fixture_$$
server_pid=""
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null || true
  psql "$TENANTRY_TEST_POSTGRES_URL" -qc "drop database if exists $pg_db" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# Written beside the fixture under a hidden name and moved in place at the end, so an interrupted
# run leaves no half fixture that the test would pick up.
new="$(dirname "$out")/.$(basename "$out").new"
rm -rf "$new"
mkdir -p "$new"
seed_args=(--nodes 10 --reservations 20 --seed 11)

for backend in sqlite postgres; do
  say "$backend: seeding the demo world at $at"
  mkdir -p "$new/$backend"
  if [[ $backend == sqlite ]]; then
    rm -f "$work/fixture.db"*
    url="sqlite://$work/fixture.db"
  else
    psql "$TENANTRY_TEST_POSTGRES_URL" -qc "drop database if exists $pg_db" -c "create database $pg_db" >/dev/null
    url="$pg_base/$pg_db"
  fi
  old demo seed "${seed_args[@]}"
  lead=$(old token create --user lead@acme.example --name upgrade-fixture)
  admin=$(old token create --user admin@tenantry.example --name upgrade-fixture)

  # Nothing that changes state runs while we read: no queue workers (they would start and finish
  # provisioning), no utilization sampler. The approval-hold sweep runs once as the server starts
  # (we give it a second after readiness) and not again for 30 s, and with the clock frozen it
  # would find nothing new then; the dump is taken after the server stops, so it holds exactly
  # what was read.
  port=$(free_port)
  "${frozen[@]}" TENANTRY_QUEUE_WORKERS=0 TENANTRY_SAMPLE_SECONDS=0 RUST_LOG=error \
    "$bin" --database-url "$url" serve --addr "127.0.0.1:$port" --site-root "$work/no-site" &
  server_pid=$!
  for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null || die "the old server did not become ready"
  sleep 1

  say "$backend: recording what a lead and the admin read"
  python3 - "http://127.0.0.1:$port" "$lead" "$admin" "$at" >"$new/$backend/answers.json" <<'PY'
"""Uses the old release's REST API as a lead and reads it as the lead and the admin; prints
what was done and read as JSON.

First the lead does what the demo seed does not: an on-demand burst, a booking cancelled inside
the free-notice period (a late fee), a booking whose end moves, and one big enough to wait for
approval, so that the bills hold every kind of line. Then each read names the engine call that
serves it (`call` and its parameters), so the upgrade test can ask the current engine the same
question at the same moment.
"""
import json, sys, urllib.error, urllib.request
from datetime import datetime, timedelta, timezone

base, lead, admin, at = sys.argv[1:5]
tokens = {"lead": {"email": "lead@acme.example", "secret": lead},
          "admin": {"email": "admin@tenantry.example", "secret": admin}}
done, reads = [], []

def call(who, method, path, body=None):
    req = urllib.request.Request(base + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + tokens[who]["secret"],
                                          "Accept": "application/json", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)

def act(who, method, path, body=None, want=(200, 201)):
    status, answer = call(who, method, path, body)
    if status not in want:
        sys.exit(f"{method} {path} answered {status}: {answer}")
    done.append({"as": who, "do": f"{method} {path}", "body": body, "status": status, "answer": answer})
    return answer

def get(who, name, path, **params):
    status, answer = call(who, "GET", path)
    if status != 200:
        sys.exit(f"GET {path} answered {status}: {answer}")
    reads.append({"as": who, "call": name, "get": path, **params, "answer": answer})
    return answer

now = datetime.fromisoformat(at.replace("Z", "+00:00"))
iso = lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ")
def booking(offering, quantity, start, hours):
    return {"offering": offering, "quantity": quantity, "start": iso(start), "end": iso(start + timedelta(hours=hours))}

# What the seed leaves out.
act("lead", "POST", "/api/v1/bursts", {"offering": "l40s-gpu", "quantity": 1, "hours": 4})
late = act("lead", "POST", "/api/v1/reservations", booking("h100-gpu", 1, now + timedelta(hours=24), 6))
act("lead", "POST", f"/api/v1/reservations/{late['id']}/cancel")
moved = act("lead", "POST", "/api/v1/reservations", booking("l40s-gpu", 1, now + timedelta(days=5), 24))
act("lead", "PATCH", f"/api/v1/reservations/{moved['id']}",
    {"end": iso(now + timedelta(days=6, hours=12))})
# More units than the team may book without approval (16 by default): held for an admin.
big = call("lead", "POST", "/api/v1/quotes", booking("a100-1g.10gb", 17, now + timedelta(days=8), 12))
if big[0] == 200 and big[1].get("max_quantity", 0) >= 17:
    act("lead", "POST", "/api/v1/reservations", booking("a100-1g.10gb", 17, now + timedelta(days=8), 12))

# The reads.
me_lead = get("lead", "me", "/api/v1/me")
me_admin = get("admin", "me", "/api/v1/me")
get("lead", "offerings", "/api/v1/offerings")
listed = get("lead", "reservations", "/api/v1/reservations")["items"]
# A detail of the first reservation of each kind and state, plus the first and the last booked.
picked = {}
for r in sorted(listed, key=lambda r: r["id"]):
    picked.setdefault((r["kind"], r["state"]), r["id"])
ids = sorted(set(picked.values()) | {min(r["id"] for r in listed), max(r["id"] for r in listed)})
for i in ids:
    get("lead", "reservation", f"/api/v1/reservations/{i}", id=i)
def month_start(y, m):
    return datetime(y + (m - 1) // 12, (m - 1) % 12 + 1, 1, tzinfo=timezone.utc)
prev_month, this_month, next_month = (month_start(now.year, now.month + d) for d in (-1, 0, 1))
for start, end in ((prev_month, this_month), (this_month, next_month)):
    span = {"from": iso(start), "to": iso(end)}
    get("lead", "chargeback", f"/api/v1/chargeback?from={iso(start)}&to={iso(end)}", **span)
    get("lead", "chargeback", f"/api/v1/chargeback?from={iso(start)}&to={iso(end)}&group_by=offering",
        **span, group_by="offering")
    month = start.strftime("%Y-%m")
    get("lead", "statement", f"/api/v1/statements/{month}", month=month)
get("admin", "usage_report", f"/api/v1/admin/reports/usage?from={iso(prev_month)}&to={iso(next_month)}",
    **{"from": iso(prev_month), "to": iso(next_month)})
get("admin", "approvals", "/api/v1/admin/approvals")
get("admin", "users", "/api/v1/admin/users")
for who in (me_lead, me_admin):
    get("admin", "user_tokens", f"/api/v1/admin/users/{who['user_id']}/tokens", user_id=who["user_id"])

json.dump({"at": at, "tokens": tokens, "done": done, "reads": reads}, sys.stdout, indent=1)
sys.stdout.write("\n")
PY
  kill "$server_pid"
  wait "$server_pid" || true
  server_pid=""

  say "$backend: dumping the database"
  if [[ $backend == sqlite ]]; then
    sqlite3 "$work/fixture.db" .dump >"$new/$backend/dump.sql"
  else
    # INSERTs rather than COPY, so the test can load the dump without psql; psql's \restrict
    # lines (random per dump) are dropped for the same reason.
    pg_dump --no-owner --no-privileges --inserts --rows-per-insert=100 "$url" \
      | grep -v '^\\' >"$new/$backend/dump.sql"
    psql "$TENANTRY_TEST_POSTGRES_URL" -qc "drop database $pg_db" >/dev/null
  fi
done

cat >"$new/fixture.json" <<JSON
{
 "release": "$commit",
 "last_migration": "$last",
 "at": "$at",
 "seed": "demo seed ${seed_args[*]}",
 "made_by": "scripts/make-upgrade-fixture.sh"
}
JSON
cat >"$new/README.md" <<README
# Schema-upgrade fixture: release ${commit:0:12} (migrations up to $last)

Made by \`scripts/make-upgrade-fixture.sh ${commit:0:12}\`; do not edit by hand, regenerate.

- \`fixture.json\`: the release's commit, its last migration, the frozen moment (\`at\`) the
  release's binary ran at, and the seed command.
- \`sqlite/dump.sql\`, \`postgres/dump.sql\`: that release's database after
  \`tenantry demo seed ${seed_args[*]}\`, two API tokens and what the lead then
  did through the REST API (\`done\` in the answers: a burst, a late cancellation, a moved end, a
  booking waiting for approval), with its \`_sqlx_migrations\` rows, so the current migrator
  applies only the newer migrations.
- \`sqlite/answers.json\`, \`postgres/answers.json\`: what the release's REST API answered a lead
  (\`lead@acme.example\`) and the admin (\`admin@tenantry.example\`) at \`at\` (\`reads\`, each
  with the engine call that serves it), and the two API token secrets it used.

The token secrets are test-only tokens of a throwaway demo database made for this fixture; they
grant nothing anywhere else. The upgrade test (\`engine/tests/upgrade.rs\`) loads each dump
into an empty database, migrates it with the current code, and checks that the tokens still
authenticate and that every recorded answer still reads back the same (new fields aside).
README
rm -rf "$out"
mv "$new" "$out"
say "fixture written to ${out#"$ROOT"/} ($(du -sh "$out" | cut -f1))"
