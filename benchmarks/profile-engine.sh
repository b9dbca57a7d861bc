#!/usr/bin/env bash
# Profiles the engine under pgbench (docs/benchmarks.md, "A connection and a query, profiled"). A
# runtime from TREE (a built checkout) with a scale-10 pgbench database, then 10 s each of
# `-S -M prepared -c 16`, `-S -M simple -c 4` and `-S -C -c 4`:
#   cpuprof  the runtime under `node --cpu-prof`; prints benchmarks/profile-stages.mjs's tables for
#            each run's window (the engine's busy time by stage, and by the leaf frame's layer);
#   perf     the runtime under --perf-basic-prof; `perf record` splits each run's CPU by binary
#            (kernel, node, JIT code, libc);
#   pgbouncer  PgBouncer (the overhead benchmark's settings) beside the engine in front of the same
#            PostgreSQL, runs alternating, 3 rounds: `perf stat` CPU and context switches per
#            transaction of each proxy (over the first 7 s of each 8 s run), and in round 1 the split
#            by binary.
# Usage, as root (perf; PgBouncer runs as the runtime's OS user pgx): ports 7101 and 7103 free,
#   bash benchmarks/profile-engine.sh TREE OUT [cpuprof|perf|pgbouncer]
set -euo pipefail
tree=$(realpath "$1"); out=$2; mode=${3:-cpuprof}; port=7101; bouncer_port=7103
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$out"; mkdir -p "$out/prof"; out=$(realpath "$out")
work=$(mktemp -d /tmp/pgx-profile-XXXXXX); chmod 755 "$work"
mono() { python3 -c 'import time; print(int(time.monotonic() * 1e6))'; }   # the clock of V8's profiles
case $mode in
  cpuprof) flags=(--cpu-prof "--cpu-prof-dir=$out/prof" --cpu-prof-interval 100) ;;
  perf) flags=(--perf-basic-prof) ;;
  *) flags=() ;;
esac
setsid node "${flags[@]}" "$tree/bin/pgx.js" start --data-dir "$work/data" --port $port --auth trust >"$out/runtime.log" 2>&1 &
runtime=$!
trap 'pkill -f "^pgbouncer $work" || true; kill -INT $runtime 2>/dev/null || true; wait $runtime 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1 120); do grep -q '^PGX ready' "$out/runtime.log" && break; sleep 0.5; done
engine=$(pgrep -f "pgx.js start --data-dir $work/data" | head -1)
export PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres
psql -q -d postgres -c 'CREATE DATABASE bench'
pgbench -q -i -s 10 bench >/dev/null 2>&1
pgbench -n -S -T 3 -c 4 -j 2 bench >/dev/null
runs=("prepared-16:-M prepared -c 16 -j 2" "simple-4:-M simple -c 4 -j 2" "connect-4:-M simple -C -c 4 -j 2")

if [[ $mode == pgbouncer ]]; then
  postmaster=$(find "$work/data" -name postmaster.pid | head -1)
  # The overhead benchmark's PgBouncer settings (benchmarks/lib/pgbouncer.ts, built in this checkout).
  node --input-type=module -e "import { pgbouncerConfig } from '$here/../dist/benchmarks/lib/pgbouncer.js';
    const [socketDir, pgPort, dir, port] = process.argv.slice(1);
    process.stdout.write(pgbouncerConfig({ workDir: dir, pgSocketDir: socketDir, pgPort: Number(pgPort), poolSize: 100, transport: 'tcp' }, dir, Number(port)));" \
    "$(sed -n 5p "$postmaster")" "$(sed -n 4p "$postmaster")" "$work" "$bouncer_port" >"$work/pgbouncer.ini"
  echo '"postgres" ""' >"$work/userlist.txt"; chown pgx "$work/pgbouncer.ini" "$work/userlist.txt"
  su pgx -s /bin/sh -c "exec pgbouncer $work/pgbouncer.ini" >"$out/pgbouncer.log" 2>&1 &
  sleep 1
  bouncer=$(pgrep -f "^pgbouncer $work" | head -1)
  for round in 1 2 3; do
    for run in "${runs[@]}"; do
      name=${run%%:*}; read -ra args <<<"${run#*:}"
      for target in engine pgbouncer; do
        if [[ $target == engine ]]; then pid=$engine; p=$port; else pid=$bouncer; p=$bouncer_port; fi
        perf stat -x, -e task-clock,context-switches -p "$pid" -o "$out/$target-$name-$round.stat" -- sleep 7 &
        watchers=($!)
        if [[ $round == 1 ]]; then perf record -q -F 2999 -p "$pid" -o "$out/$target-$name.perf" -- sleep 7 2>/dev/null & watchers+=($!); fi
        PGPORT=$p pgbench -n -S "${args[@]}" -T 8 bench >"$out/$target-$name-$round.pgbench"
        wait "${watchers[@]}"
        tps=$(grep -o 'tps = [0-9.]*' "$out/$target-$name-$round.pgbench" | cut -d' ' -f3)
        awk -F, -v tps="$tps" -v what="$round $name $target" '
          $3 == "task-clock" { cpu = $1 } $3 == "context-switches" { cs = $1 }
          END { printf "%s: %.0f tps, %.1f us CPU and %.2f context switches per transaction\n", what, tps, cpu * 1000 / (tps * 7), cs / (tps * 7) }' "$out/$target-$name-$round.stat"
      done
    done
  done
  for f in "$out"/*.perf; do echo "== $(basename "$f" .perf), round 1, by binary:"; perf report -q -i "$f" --sort dso 2>/dev/null | head -4; done
  exit 0
fi

for run in "${runs[@]}"; do
  name=${run%%:*}; read -ra args <<<"${run#*:}"
  t0=$(mono)
  watchers=()
  if [[ $mode == perf ]]; then perf record -q -F 2999 -p "$engine" -o "$out/$name.perf" -- sleep 9 2>/dev/null & watchers+=($!); fi
  pgbench -n -S "${args[@]}" -T 10 bench >"$out/$name.pgbench"
  [[ ${#watchers[@]} -eq 0 ]] || wait "${watchers[@]}"
  echo "$t0 $(mono) $(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out/$name.pgbench")" >"$out/$name.run"
done
kill -INT $runtime; wait $runtime || true   # --cpu-prof writes the profile at exit
for run in "${runs[@]}"; do
  name=${run%%:*}; read -r t0 t1 tx <"$out/$name.run"
  echo "== $name: $(grep -o 'tps = [0-9.]*' "$out/$name.pgbench")"
  if [[ $mode == perf ]]; then perf report -q -i "$out/$name.perf" --sort dso 2>/dev/null | head -4; continue; fi
  profile=$(ls "$out"/prof/*.cpuprofile)
  mkdir -p "$out/$name"; ln -sf "$profile" "$out/$name/"
  start=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).startTime)' "$profile")
  echo "$((t0 - start)) $((t1 - start))" >"$out/$name/window"
  node "$here/profile-stages.mjs" "$out/$name" "$tx"
done
