#!/usr/bin/env bash
# redlock-churn side by side: locksim and SimGrid on the same workload, in one run, for C = 3, 30, 300.
# Usage: bench/compare.sh [BUILD_DIR]      (default build-bench next to this repo's root; configured if absent)
# Env:   BUILD_TYPE (default RelWithDebInfo, for a fresh build dir), SIM_SECONDS (default "400 70 6", one per C:
#        chosen so that each SimGrid run takes a few seconds), CLIENTS (default "3 30 300"),
#        CPU_TIME=1 to measure each program's CPU seconds instead of wall seconds (on a machine busy with other
#        work; the printed field names stay the same), REPEAT (default 3): each program runs this many times
#        per C and its fastest run is printed (locksim's runs last ~0.1 s, so one run alone is noisy; both
#        programs get the same treatment, and their counts are the same in every run: both are seeded).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build-bench}"
read -r -a clients <<<"${CLIENTS:-3 30 300}"
read -r -a seconds <<<"${SIM_SECONDS:-400 70 6}"
repeat="${REPEAT:-3}"
if ! [[ "$repeat" =~ ^[1-9][0-9]*$ ]]; then
  echo "compare.sh: REPEAT must be a positive integer, not '$repeat'" >&2
  exit 2
fi
if [[ ${#clients[@]} -ne ${#seconds[@]} ]]; then
  echo "compare.sh: CLIENTS and SIM_SECONDS need as many entries" >&2
  exit 2
fi

if [[ ! -f "$build/build.ninja" && ! -f "$build/Makefile" ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" >/dev/null
fi
# The standalone program runs the same code as `locksim bench churn`, without building the whole tool.
cmake --build "$build" --target locksim-bench >/dev/null
extra=()
if [[ "${CPU_TIME:-0}" == 1 ]]; then
  extra=(--cpu-time)
  echo "CPU_TIME=1: wall_s and msgs_per_wall_s below are per CPU second of each program"
fi
locksim=("$build/bench/locksim-bench" churn)
simgrid=""
targets="$(cmake --build "$build" --target help 2>/dev/null || true)"
if grep -q 'locksim-bench-churn-simgrid' <<<"$targets"; then
  cmake --build "$build" --target locksim-bench-churn-simgrid >/dev/null
  simgrid="$build/bench/locksim-bench-churn-simgrid"
else
  echo "SimGrid not found when $build was configured (apt-get install libsimgrid-dev, then re-run cmake):"
  echo "printing locksim only."
fi

field() {  # field NAME LINE: the value of NAME=... in LINE
  tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p"
}

best_of() {  # best_of CMD...: run CMD $repeat times, print the line with the highest msgs_per_wall_s
  local best="" line
  for ((r = 0; r < repeat; ++r)); do
    line="$("$@")"
    if [[ -z "$best" ]] || awk -v a="$(field msgs_per_wall_s "$line")" -v b="$(field msgs_per_wall_s "$best")" \
      'BEGIN { exit !(a > b) }'; then
      best="$line"
    fi
  done
  echo "$best"
}

summary=()
for i in "${!clients[@]}"; do
  c="${clients[$i]}"
  t="${seconds[$i]}"
  echo "== clients=$c sim_seconds=$t (fastest of $repeat runs each)"
  l="$(best_of "${locksim[@]}" --clients "$c" --sim-seconds "$t" "${extra[@]}")"
  echo "$l"
  if [[ -n "$simgrid" ]]; then
    s="$(best_of "$simgrid" --clients "$c" --sim-seconds "$t" "${extra[@]}")"
    echo "$s"
    line="$(awk -v lr="$(field msgs_per_wall_s "$l")" -v sr="$(field msgs_per_wall_s "$s")" \
      -v la="$(field acquisitions "$l")" -v sa="$(field acquisitions "$s")" -v c="$c" \
      'BEGIN { printf "clients=%s ratio_msgs_per_wall_s=%.2f acquisitions_diff_pct=%+.2f", c, lr / sr,
               (sa > 0 ? (la - sa) * 100.0 / sa : 0) }')"
    echo "$line"
    summary+=("$line")
  fi
done
if [[ -n "$simgrid" ]]; then
  echo "== summary (ratio = msgs_per_wall_s locksim / simgrid; diff = acquisitions (locksim - simgrid) / simgrid)"
  printf '%s\n' "${summary[@]}"
fi
