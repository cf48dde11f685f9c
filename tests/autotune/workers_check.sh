#!/usr/bin/env bash
# ctest autotune_workers: deltac-tune --workers=2 on the CPU (the code path
# of one process per GPU): the two workers split the buckets, their parts
# merge into one database and are removed; a rerun skips every bucket; a
# part that a killed run left behind is folded in before the workers start.
#   workers_check.sh DELTAC_TUNE WORK_DIR
set -euo pipefail
tune="$1" dir="$2"
db="$dir/workers.json"
rm -f "$db" "$db".part*.json "$db".tmp.*
args=(--variant=gated --heads=1 --v-heads=2 --key-dim=64 --value-dim=64
      --buckets=1,16,64 --decode-batch=2 --fast --quiet --workers=2 -o "$db")
fail() { echo "FAIL: $1"; exit 1; }
out="$(env -u DELTAC_TUNING_DB "$tune" "${args[@]}")"
echo "$out"
echo "$out" | grep -q '^\[worker 0\] bucket      1 x 2' || fail "worker 0 did not tune bucket 1"
echo "$out" | grep -q '^\[worker 1\] bucket     16 x 1' || fail "worker 1 did not tune bucket 16"
echo "$out" | grep -q '^\[worker 0\] bucket     64 x 1' || fail "worker 0 did not tune bucket 64"
echo "$out" | grep -q 'database .*: 3 records' || fail "expected 3 merged records"
[ "$(grep -c '"family"' "$db")" = 3 ] || { cat "$db"; fail "expected 3 records in $db"; }
ls "$db".part*.json 2>/dev/null && fail "parts left behind"
out="$(env -u DELTAC_TUNING_DB "$tune" "${args[@]}")"
echo "$out"
[ "$(echo "$out" | grep -c 'already in')" = 3 ] || fail "the rerun did not skip all 3 buckets"
# A killed run's part (here: the whole database, as worker 5 of another
# count would have left it) is merged before the workers start.
mv "$db" "$db.part5.json"
out="$(env -u DELTAC_TUNING_DB "$tune" "${args[@]}")"
echo "$out"
[ "$(echo "$out" | grep -c 'already in')" = 3 ] || fail "the left part was not folded in"
[ -e "$db.part5.json" ] && fail "the left part was not removed"
# Bad counts are refused with a message.
if "$tune" --variant=gated --heads=1 --key-dim=64 --value-dim=64 --workers=all -o "$db" 2>"$dir/workers.err"; then
  fail "--workers=all on the CPU was accepted"
fi
grep -q 'workers=all counts GPUs' "$dir/workers.err" || fail "no message for --workers=all"
if "$tune" --variant=gated --heads=1 --key-dim=64 --value-dim=64 --workers=2 2>"$dir/workers.err"; then
  fail "--workers without -o was accepted"
fi
grep -q 'needs -o' "$dir/workers.err" || fail "no message for --workers without -o"
echo "workers: ok"
