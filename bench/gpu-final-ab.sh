#!/usr/bin/env bash
# GPU machine, one call: A/B of an older commit (.gpu/old) against this tree
# on the 50M-row cases that bound the parallel load and the index builds,
# each beside PostgreSQL's own sort in the same run:
#   - ORDER BY int8, work_mem 64MB, 8 workers (external: runs and merge)
#   - ORDER BY int8, in memory, 8 workers
#   - CREATE INDEX, 8 workers, maintenance_work_mem 64MB and 1GB
#   - CREATE INDEX, serial, maintenance_work_mem 64MB
# The old side is built without the CUDA engine and uses this tree's (cuda/
# must be the same in both).  Make the old tree with
#   rm -rf .gpu/old && mkdir -p .gpu/old && git archive <commit> | tar x -C .gpu/old
#   run  command="OUT=$OUT bash bench/gpu-final-ab.sh"  carry=[".gpu"]
# The table is built while gpusort compiles.  Results: $OUT/final.md (each
# cell: milliseconds of each run), $OUT/splits.txt (DEBUG2 lines of the
# index builds), $OUT/explain-*.txt.  Env: ROWS (default 50000000), RUNS
# (this tree's runs, default 2), OLD_RUNS (default 1), AB_SETTINGS (server
# settings instead of gpu-env.sh's), DEADLINE seconds after which no case starts (default 420).
set -uo pipefail
T0=$(date +%s)
say() { echo "== [$(($(date +%s) - T0))s] $*"; }
left() { echo $((DEADLINE - ($(date +%s) - T0))); }
ROWS=${ROWS:-50000000}
RUNS=${RUNS:-2}
OLD_RUNS=${OLD_RUNS:-1}
DEADLINE=${DEADLINE:-420}
OUT=${OUT:-/tmp/gpu-final-ab}
mkdir -p "$OUT"

# shellcheck disable=SC1091
source .gpu/pg-up.sh .gpu/debs -c shared_buffers="${AB_SHARED_BUFFERS:-32GB}" >"$OUT/pgup.log" 2>&1
# shellcheck disable=SC1091
source bench/gpu-env.sh
# a smaller machine's dry run may ask for less shared memory
GS_AB_SETTINGS=${AB_SETTINGS:-$GS_AB_SETTINGS}

say "build (new with CUDA, old without) and data, at once"
(gs_ab_data >"$OUT/data.log" 2>&1) &
datapid=$!
(timeout 300 make -j12 PG_CONFIG="$PG_CONFIG" with_llvm=no all >"$OUT/build.log" 2>&1) &
(cd .gpu/old && timeout 300 make -j4 WITH_CUDA=no PG_CONFIG="$PG_CONFIG" with_llvm=no all >"$OUT/build-old.log" 2>&1) &
wait
ls gpusort.so >/dev/null || { tail -20 "$OUT/build.log"; exit 1; }
ls .gpu/old/gpusort.so >/dev/null || { tail -20 "$OUT/build-old.log"; exit 1; }
make PG_CONFIG="$PG_CONFIG" with_llvm=no install >/dev/null 2>&1 || { echo "install failed"; exit 1; }
say "built; data: $(tail -1 "$OUT/data.log")"

PAR="SET max_parallel_workers_per_gather = 8; SET max_parallel_workers = 8; SET gpusort.parallel_load_mem = '64GB'"
QI="SELECT * FROM g50 ORDER BY k OFFSET $ROWS"
CI="CREATE INDEX g50_s ON g50(k)"
DI="DROP INDEX IF EXISTS g50_s"
declare -A CASE=(
	[ext]="$PAR; SET work_mem = '64MB'|$QI"
	[mem]="$PAR; SET work_mem = '16GB'|$QI"
	[idx8_64]="SET max_parallel_maintenance_workers = 8; SET maintenance_work_mem = '64MB'; SET client_min_messages = debug2|$CI"
	[idx8_1g]="SET max_parallel_maintenance_workers = 8; SET maintenance_work_mem = '1GB'; SET client_min_messages = debug2|$CI"
	[idx0_64]="SET max_parallel_maintenance_workers = 0; SET maintenance_work_mem = '64MB'; SET client_min_messages = debug2|$CI"
)
ORDER=(ext mem idx8_64 idx8_1g idx0_64)
declare -A RES

# one timed statement: $1 variant, $2 case; the time goes into RES
t() {
	local v=$1 c=$2 set=${CASE[$2]%%|*} q=${CASE[$2]#*|} s e extra=""
	[ "$(left)" -gt 0 ] || { RES[$v,$c]+="skipped "; return; }
	[ "$v" = PostgreSQL ] && extra="SET gpusort.enabled = off;"
	pgsql -q -c "$DI" >/dev/null 2>&1
	s=$(date +%s%N)
	pgsql -q -c "$extra $set" -c "$q" >/dev/null 2>"$OUT/stmt.err"
	e=$(( ($(date +%s%N) - s) / 1000000 ))
	grep -q ERROR "$OUT/stmt.err" && { e="ERR"; cat "$OUT/stmt.err" >>"$OUT/errors.txt"; }
	grep -h "gpusort index\|built by" "$OUT/stmt.err" | sed "s/^/$v $c: /" >>"$OUT/splits.txt"
	RES[$v,$c]+="$e "
	say "$v $c: $e ms"
}

wait $datapid
# shellcheck disable=SC2086
pg_restart $GS_AB_SETTINGS || exit 1
pgsql -qc "CREATE EXTENSION IF NOT EXISTS gpusort"
pgsql -Atc "SELECT name || '=' || value FROM gpusort_info()" | tr '\n' ' '; echo
t warm mem                      # warm the table and the GPU service

# variant: new (this tree), then old, then new again; PostgreSQL between
for c in "${ORDER[@]}"; do
	t PostgreSQL "$c"
	for ((r = 0; r < RUNS; r++)); do t new "$c"; done
done
pgsql -c "$PAR; SET work_mem = '64MB'" -c "EXPLAIN (ANALYZE, TIMING OFF) $QI" >"$OUT/explain-new-ext.txt" 2>&1
pgsql -c "$PAR; SET work_mem = '16GB'" -c "EXPLAIN (ANALYZE, TIMING OFF) $QI" >"$OUT/explain-new-mem.txt" 2>&1

(cd .gpu/old && make WITH_CUDA=no PG_CONFIG="$PG_CONFIG" with_llvm=no install >/dev/null 2>&1) ||
	{ echo "install of .gpu/old failed"; exit 1; }
# shellcheck disable=SC2086
pg_restart $GS_AB_SETTINGS || exit 1
t warm mem
for c in "${ORDER[@]}"; do
	for ((r = 0; r < OLD_RUNS; r++)); do t old "$c"; done
done
pgsql -c "$PAR; SET work_mem = '64MB'" -c "EXPLAIN (ANALYZE, TIMING OFF) $QI" >"$OUT/explain-old-ext.txt" 2>&1
pgsql -q -c "$DI"

med() { printf '%s\n' "$@" | grep -E '^[0-9]+$' | sort -n | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "-"}'; }
{
	echo "| case | PostgreSQL ms | old ms (runs) | new ms (runs) | old speedup | new speedup |"
	echo "| --- | ---: | ---: | ---: | ---: | ---: |"
	for c in "${ORDER[@]}"; do
		# shellcheck disable=SC2086
		p=$(med ${RES[PostgreSQL,$c]:-}); o=$(med ${RES[old,$c]:-}); n=$(med ${RES[new,$c]:-})
		ro=$(awk -v p="$p" -v x="$o" 'BEGIN {if (p+0 > 0 && x+0 > 0) printf "%.2fx", p / x; else print "-"}')
		rn=$(awk -v p="$p" -v x="$n" 'BEGIN {if (p+0 > 0 && x+0 > 0) printf "%.2fx", p / x; else print "-"}')
		echo "| $c | $p | $o (${RES[old,$c]:-}) | $n (${RES[new,$c]:-}) | $ro | $rn |"
	done
} >"$OUT/final.md"
cat "$OUT/final.md"
grep -E "GpuSort Time|Merge|Execution" "$OUT"/explain-*.txt
say done
