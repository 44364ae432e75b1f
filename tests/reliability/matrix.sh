#!/bin/sh
# `locksim matrix`: the verdict table against each file's expectations, whole or one table per resource kind.
# A scenario whose file expects the wrong verdict is a ✗ and exit 1. Usage: matrix.sh LOCKSIM SOURCE_DIR.
set -u
bin=$1
src=$2
failed=0
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
  echo "matrix: $*" >&2
  failed=1
}

out=$("$bin" matrix --by-resource kleppmann-gc-pause scheduler-leader-gc-pause payment-api-gc-pause 2>&1)
rc=$?
[ $rc -eq 0 ] || fail "three catalog scenarios gave exit $rc: $out"
# One table per kind, in the kinds' order, each headed by the kind's name and the property it is judged by.
kinds=$(printf '%s\n' "$out" | sed -n 's/^resource \([a-z-]*\):.*/\1/p' | tr '\n' ' ')
[ "$kinds" = "store checkpoint-table external-api " ] || fail "tables for '$kinds', want store checkpoint-table external-api"
# The checkpoint-table table holds its own scenario only, and its header names only the protocols it runs.
section=$(printf '%s\n' "$out" | sed -n '/^resource checkpoint-table/,/^$/p')
printf '%s\n' "$section" | grep -q '^scheduler-leader-gc-pause ' || fail "scheduler-leader-gc-pause not in its table"
printf '%s\n' "$section" | grep -q 'kleppmann-gc-pause' && fail "kleppmann-gc-pause in the checkpoint-table table"
printf '%s\n' "$section" | grep -q 'consul ' && fail "a consul column in a table no scenario of which runs consul"
printf '%s\n' "$out" | grep -q '0 mismatch(es)' || fail "no '0 mismatch(es)' line: $out"

# Columns in name order: a protocol beside its +fence twin.
header=$("$bin" matrix kleppmann-gc-pause 2>&1 | head -1)
cols=$(printf '%s\n' "$header" | tr -s ' ' '\n' | sed 1d)
sorted=$(printf '%s\n' "$cols" | LC_ALL=C sort)
[ "$cols" = "$sorted" ] || fail "columns not in name order: $header"
printf '%s\n' "$header" | grep -q 'consul  *consul+fence' || fail "consul and consul+fence not side by side: $header"

# The markdown form: a bold heading per kind, then a table.
md=$("$bin" matrix --by-resource --format md kleppmann-gc-pause payment-api-gc-pause 2>&1)
printf '%s\n' "$md" | grep -q '^\*\*external-api\*\*: ' || fail "no markdown heading for external-api: $md"
printf '%s\n' "$md" | grep -q '^| payment-api-gc-pause | ' || fail "no markdown row for payment-api-gc-pause: $md"

# A wrong expectation: ✗ and exit 1.
sed 's/^redis *= *"unsafe"/redis = "safe"/' "$src/scenarios/catalog/kleppmann-gc-pause.toml" >"$dir/wrong.toml"
grep -q '^redis = "safe"' "$dir/wrong.toml" || fail "could not write a wrong expectation (the file's [expect] changed shape?)"
out=$("$bin" matrix --by-resource "$dir/wrong.toml" 2>&1)
rc=$?
[ $rc -eq 1 ] || fail "a wrong expectation gave exit $rc (want 1): $out"
printf '%s\n' "$out" | grep -q 'unsafe ✗' || fail "no 'unsafe ✗' cell for the wrong expectation: $out"
printf '%s\n' "$out" | grep -q '1 mismatch(es)' || fail "not one mismatch: $out"

# Bad input: an unknown protocol or format is exit 2.
"$bin" matrix kleppmann-gc-pause -p no-such-protocol >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] || fail "an unknown protocol gave exit $rc (want 2)"
"$bin" matrix --by-resource --format html kleppmann-gc-pause >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] || fail "an unknown format gave exit $rc (want 2)"

# `locksim list` names every kind a scenario may declare, with the property its matrix table is headed by.
listed=$("$bin" list 2>&1)
tables=$("$bin" matrix --by-resource 2>/dev/null)
for k in store checkpoint-table object-store external-api cas-row job-queue; do
  head_line=$(printf '%s\n' "$tables" | sed -n "s/^resource $k: //p")
  [ -n "$head_line" ] || fail "no matrix table for kind $k"
  printf '%s\n' "$listed" | grep -qF "  $k" || fail "locksim list does not name kind $k"
  [ -z "$head_line" ] || printf '%s\n' "$listed" | grep -qF "$head_line" || fail "locksim list does not give $k's property"
done
# A scenario with several resources has a table of its own, naming its resources and their kinds, and is not
# counted under its first resource's kind.
several=$(printf '%s\n' "$tables" | sed -n '/^several resources/,/^$/p')
printf '%s\n' "$several" | grep -qF "scheduler-leader-checkpoint-and-email-gc-pause (checkpoints: checkpoint-table, mailer: external-api)" ||
  fail "the several-resources table does not name the scheduler's checkpoints and mailer"
printf '%s\n' "$tables" | sed -n '/^resource checkpoint-table:/,/^$/p' | grep -q "checkpoint-and-email" &&
  fail "the several-resources scenario is listed under checkpoint-table"
exit $failed
