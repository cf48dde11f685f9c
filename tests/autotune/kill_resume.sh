#!/usr/bin/env bash
# ctest autotune_kill_resume: deltac-tune killed with SIGKILL after its first
# bucket was written leaves a valid database (atomic writes); the same
# command then skips what was finished and completes the rest.
#   kill_resume.sh DELTAC_TUNE WORK_DIR
set -euo pipefail
tune="$1" dir="$2"
db="$dir/kill_resume.json"
rm -f "$db" "$db".tmp.*
args=(--variant=gated --heads=2 --v-heads=4 --key-dim=64 --value-dim=64
      --buckets=1,4096,8192 --fast --quiet -o "$db")
env -u DELTAC_TUNING_DB "$tune" "${args[@]}" >/dev/null &
pid=$!
for _ in $(seq 1 1200); do
  grep -q '"max_tokens": 1,' "$db" 2>/dev/null && break
  sleep 0.05
done
kill -9 "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
out="$(env -u DELTAC_TUNING_DB "$tune" "${args[@]}")"
echo "$out"
echo "$out" | grep -q "bucket      1: already in" || { echo "FAIL: bucket 1 not kept"; exit 1; }
[ "$(grep -c '"family"' "$db")" = 3 ] || { echo "FAIL: expected 3 records"; cat "$db"; exit 1; }
echo "kill_resume: ok"
