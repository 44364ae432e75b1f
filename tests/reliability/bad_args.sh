#!/bin/sh
# Bad numbers on the command line: each must end at once with exit 2 and a message naming its option (never
# a silent wrap-around, a saturated value, a hang or an out-of-memory crash). Usage: bad_args.sh LOCKSIM.
set -u
bin=$1
failed=0
# expect FIELD ARGS...: exit 2 within 10 s, with FIELD in the message.
expect() {
  field=$1
  shift
  err=$(timeout 10 "$bin" "$@" 2>&1 >/dev/null)
  rc=$?
  if [ $rc -ne 2 ] || ! printf '%s\n' "$err" | grep -q -e "$field"; then
    echo "bad_args: '$*' gave exit $rc (want 2, naming $field): $err" >&2
    failed=1
  fi
}
expect --seeds explore no-faults -p lease --no-shrink --no-progress --seeds 0
expect --seeds explore no-faults -p lease --no-shrink --no-progress --seeds -5
expect --seeds explore no-faults -p lease --no-shrink --no-progress --seeds 0x10
expect --seeds explore no-faults -p lease --no-shrink --no-progress --seeds 18446744073709551616
expect --seeds explore no-faults -p lease --no-shrink --no-progress --seeds 99999999999999999999999
expect --seeds explore no-faults -p lease --no-shrink --no-progress --first-seed 2 --seeds 18446744073709551615
expect --first-seed explore no-faults -p lease --no-shrink --no-progress --first-seed -1
expect --first-seed explore no-faults -p lease --no-shrink --no-progress --first-seed 9223372036854775808
expect --seeds explore no-faults -p lease --no-shrink --no-progress --first-seed 9223372036854775807 --seeds 2
expect --jobs explore no-faults -p lease --no-shrink --no-progress --jobs 100000
expect --max-faults explore no-faults -p lease --no-shrink --no-progress --max-faults 4000000000
expect --shards explore no-faults -p lease --no-shrink --no-progress --shards 0
expect --shard explore no-faults -p lease --no-shrink --no-progress --shard 4294967297/4294967298
expect --shard explore no-faults -p lease --no-shrink --no-progress --shard 1/-4
expect --shard explore no-faults -p lease --no-shrink --no-progress --shard ' 1/4'
export JOB_COMPLETION_INDEX=-1
expect JOB_COMPLETION_INDEX explore no-faults -p lease --no-shrink --no-progress --shards 4
JOB_COMPLETION_INDEX=4294967297
expect JOB_COMPLETION_INDEX explore no-faults -p lease --no-shrink --no-progress --shards 4
unset JOB_COMPLETION_INDEX
expect --shard-number explore no-faults -p lease --no-shrink --no-progress --shard-number 0/4
expect --shard-number explore no-faults -p lease --no-shrink --no-progress --shard-number 5/4
expect "give one of" explore no-faults -p lease --no-shrink --no-progress --shard 0/4 --shard-number 1/4
export CI_NODE_INDEX=0
expect CI_NODE_INDEX explore no-faults -p lease --no-shrink --no-progress --shards 4
CI_NODE_INDEX=2 CI_NODE_TOTAL=3 expect CI_NODE_TOTAL explore no-faults -p lease --no-shrink --no-progress --shards 4
unset CI_NODE_INDEX CI_NODE_TOTAL
expect "JOB_COMPLETION_INDEX (Kubernetes, 0-based) or CI_NODE_INDEX" explore no-faults -p lease --no-progress --shards 4
expect --shrink-runs explore no-faults -p lease --no-shrink --no-progress --shrink-runs 4294967296
expect --seed run no-faults -p lease --seed 18446744073709551616
expect --seed run no-faults -p lease --seed -1
expect --seed run no-faults -p lease --seed 9223372036854775808
expect --seed run no-faults -p lease --seed 1.5
# Words: a misspelt option or value gets the nearest one, every message starts with "locksim: error:".
expect "unknown option '--seeed' (did you mean '--seed'?)" run no-faults -p lease --seeed 3
expect "did you mean 'anything'" explore no-faults -p lease --mode anythin
expect "did you mean 'junit'" run no-faults -p lease --report junt
expect "did you mean '--version'" --versio
expect "a directory, not a scenario file" run /tmp
expect "^locksim: error: " run no-faults -p lease --seeed 3
expect "^locksim: error: " check --no-colour
# The benchmarks, when this build has them.
if "$bin" bench churn --help >/dev/null 2>&1; then
  expect --sim-seconds bench churn --clients 3 --sim-seconds 100000000000
  expect --sim-seconds bench churn --sim-seconds inf
  expect --sim-seconds bench churn --sim-seconds nan
  expect --sim-seconds bench scale --clients 30 --sim-seconds 1e10
  expect --messages bench scale --clients 30 --messages 18446744073709551615
  expect --rounds bench scale --clients 30 --rounds 0
  expect --rounds bench scale --clients 30 --rounds 99999999999999999999
  expect --rounds bench scale --clients 30 --rounds
fi
# A leading zero is decimal, not octal: 010 seeds are ten runs.
runs=$(timeout 60 "$bin" explore no-faults -p lease --seeds 010 --no-progress --no-shrink 2>&1 |
  sed -n 's/.*: \([0-9]*\) run(s) on.*/\1/p')
[ "$runs" = 10 ] || { echo "bad_args: --seeds 010 gave '$runs' runs, want 10" >&2; failed=1; }
# 1-based shard numbers (a GitHub matrix; GitLab's CI_NODE_INDEX) are the 0-based shard one below.
for how in "--shard-number 2/4" "--shards 4"; do
  line=$(CI_NODE_INDEX=2 CI_NODE_TOTAL=4 timeout 60 "$bin" explore no-faults -p lease --seeds 40 $how --no-progress \
    --no-shrink 2>&1 | head -1)
  case $line in
    *"10 run(s) on"*", shard 1/4") ;;
    *) echo "bad_args: '$how' (CI_NODE_INDEX=2) gave '$line', want 10 runs of shard 1/4" >&2; failed=1 ;;
  esac
done
[ $failed -eq 0 ] && echo "bad_args: every bad number rejected with exit 2"
exit $failed
