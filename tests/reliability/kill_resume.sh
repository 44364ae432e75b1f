#!/bin/sh
# kill -9 of `locksim explore --out` mid-run, then `--resume`: every seed must be reported exactly once (issue 9).
# Usage: kill_resume.sh LOCKSIM WORKDIR. (explore exits 1 when a seed is unsafe: a result, not an error.)
set -u
bin=$1
dir=$2
seeds=2000
rm -rf "$dir" && mkdir -p "$dir" || exit 1
out=$dir/runs.jsonl
"$bin" explore no-faults -p lease --seeds $seeds -j 2 --no-progress --no-shrink -o "$out" >"$dir/first.log" 2>&1 &
pid=$!
# Wait until some lines are written (at most ~30 s), then kill it without warning.
i=0
while [ "$( (wc -l <"$out") 2>/dev/null || echo 0)" -lt 100 ] && [ $i -lt 300 ]; do
  sleep 0.1
  i=$((i + 1))
done
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
before=$(wc -l <"$out")
if [ "$before" -ge $seeds ]; then
  echo "kill_resume: the run finished before it could be killed ($before lines); nothing tested" >&2
  exit 1
fi
"$bin" explore no-faults -p lease --seeds $seeds -j 2 --no-progress --no-shrink -o "$out" --resume \
  >"$dir/resume.log" 2>&1
rc=$?
[ $rc -le 1 ] || { cat "$dir/resume.log"; echo "kill_resume: --resume exited $rc" >&2; exit 1; }
lines=$(grep -c '"seed"' "$out")
unique=$(sed -n 's/.*"seed": *\([0-9]*\).*/\1/p' "$out" | sort -n | uniq | wc -l)
first=$(sed -n 's/.*"seed": *\([0-9]*\).*/\1/p' "$out" | sort -n | head -n1)
last=$(sed -n 's/.*"seed": *\([0-9]*\).*/\1/p' "$out" | sort -n | tail -n1)
echo "killed after $before complete line(s); after --resume: $lines lines, $unique distinct seeds ($first..$last)"
[ "$lines" -eq $seeds ] && [ "$unique" -eq $seeds ] && [ "$first" -eq 1 ] && [ "$last" -eq $seeds ]
