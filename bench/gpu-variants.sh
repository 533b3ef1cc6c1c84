#!/usr/bin/env bash
# GPU machine, one call: the 50M-row ORDER BY cases (bench/gpu-ab.sh's) of the
# tree as it is, PostgreSQL's own sort beside them, with rows for settings
# variants of gpusort; then bench/cancel.sh on the same table.
#   run  command="OUT=$OUT bash bench/gpu-variants.sh"  carry=[".gpu"]
# Env: VARIANTS ("name=settings;..." rows of gpusort at work_mem 64MB, e.g.
# "threads9=SET gpusort.cpu_threads = 9"), CASES (default "mem ext"),
# CANCEL_CONFIGS (bench/cancel.sh's CONFIGS; empty: no cancel run),
# CANCEL_TIMEOUTS.  Results: $OUT/variants.md, $OUT/explain-*.txt,
# $OUT/cancel.md.
set -uo pipefail
OUT=${OUT:-/tmp/gpu-variants}
ROWS=${ROWS:-50000000}
mkdir -p "$OUT"
T0=$(date +%s)
say() { echo "== [$(($(date +%s) - T0))s] $*"; }
# shellcheck disable=SC1091
source .gpu/pg-up.sh .gpu/debs >"$OUT/pgup.log" 2>&1
# shellcheck disable=SC1091
source bench/gpu-env.sh
gs_bench_setup >"$OUT/setup.log" 2>&1
say "data ready"
PAR="SET max_parallel_workers_per_gather = 8; SET max_parallel_workers = 8; SET gpusort.parallel_load_mem = '64GB'"
QI="SELECT * FROM g50 ORDER BY k OFFSET $ROWS"
t() { local s; s=$(date +%s%N); pgsql -q -c "$1" -c "$2" >/dev/null 2>>"$OUT/err.log"; echo $(( ($(date +%s%N) - s) / 1000000 )); }
med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
res=$OUT/variants.md
echo "| case | variant | median ms | runs ms |" >"$res"
echo "| --- | --- | ---: | --- |" >>"$res"
row() { local c=$1 name=$2 set=$3 n=$4 mem a=() x
	mem="SET work_mem = '16GB'"; [ "$c" = ext ] && mem="SET work_mem = '64MB'"
	for ((x = 0; x < n; x++)); do a+=($(t "$PAR; $mem; $set" "$QI")); done
	echo "| $c | $name | $(med "${a[@]}") | ${a[*]} |" >>"$res"
	pgsql -c "$PAR; $mem; $set" -c "EXPLAIN (ANALYZE, TIMING OFF) $QI" >"$OUT/explain-$c-$name.txt" 2>&1
	say "$c $name"
}
t "$PAR" "$QI" >/dev/null
for c in ${CASES:-mem ext}; do
	row "$c" PostgreSQL "SET gpusort.enabled = off" 2
	row "$c" gpusort "" 3
	if [ "$c" = ext ]; then
		IFS=';' read -ra vs <<<"${VARIANTS:-}"
		for v in "${vs[@]}"; do row ext "${v%%=*}" "${v#*=}" 3; done
	fi
done
rm -f "$OUT"/explain-*-PostgreSQL.txt
if [ -n "${CANCEL_CONFIGS:-}" ]; then
	CONFIGS=$CANCEL_CONFIGS TIMEOUTS=${CANCEL_TIMEOUTS:-300 700 1000 1500 2000} TABLE=g50 \
		bash bench/cancel.sh >"$OUT/cancel.md" 2>&1
	say cancel
fi
cat "$res" "$OUT/cancel.md" 2>/dev/null
for f in "$OUT"/explain-*; do echo "## $f"; grep -E "GpuSort (Time|Chunks)|Leader Load|Collect|Execution" "$f"; done
rm -f "$OUT/pgup.log" "$OUT/setup.log" "$OUT/data.log" "$OUT/build.log"
