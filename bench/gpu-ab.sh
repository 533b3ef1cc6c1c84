#!/usr/bin/env bash
# GPU machine: A/B of the three parallel ORDER BY cases (int8 and text in memory, int8 with work_mem 64MB).
# The old side is a source tree in .gpu/old (git-ignored), made with
#   rm -rf .gpu/old && mkdir -p .gpu/old && git archive <commit> | tar x -C .gpu/old
#   run  command="bash bench/gpu-ab.sh"  carry=[".gpu"]
set -uo pipefail
T0=$(date +%s)
say() { echo "== [$(($(date +%s) - T0))s] $*"; }
ROWS=${ROWS:-50000000}
OLDC=${OLDC:-old}; NEWC=${NEWC:-new}
source .gpu/pg-up.sh .gpu/debs -c shared_buffers=32GB >$OUT/pgup.log 2>&1
source bench/gpu-env.sh
say build
gs_ab_build old
say data
gs_ab_data
say "data ready"
PAR="SET max_parallel_workers_per_gather = 8; SET max_parallel_workers = 8; SET gpusort.parallel_load_mem = '64GB'"
QI="SELECT * FROM g50 ORDER BY k OFFSET $ROWS"
QT="SELECT * FROM g50 ORDER BY t OFFSET $ROWS"
MI="SET work_mem='16GB'"; M64="SET work_mem='64MB'"
t() { local s=$(date +%s%N); pgsql -q -c "$1" -c "$2" >/dev/null 2>>$OUT/err.log; echo $(( ($(date +%s%N)-s)/1000000 )); }
med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
res=$OUT/ab.md
echo "| variant | int8 in memory ms | text (C) in memory ms | int8 work_mem 64MB ms |" > $res
echo "| --- | --- | --- | --- |" >> $res
row() { local name=$1 extra=$2 n=$3 a b c x
	a=(); b=(); c=()
	for ((x = 0; x < n; x++)); do
		a+=($(t "$PAR; $MI; $extra" "$QI")); b+=($(t "$PAR; $MI; $extra" "$QT")); c+=($(t "$PAR; $M64; $extra" "$QI"))
	done
	echo "| $name | $(med "${a[@]}") (${a[*]}) | $(med "${b[@]}") (${b[*]}) | $(med "${c[@]}") (${c[*]}) |" >> $res
	say "$name done"
}
# EXPLAIN_SET: more settings for the EXPLAINs (e.g. client_min_messages = debug1)
expl() { local name=$1 x=${EXPLAIN_SET:-SELECT 1}
	pgsql -c "$PAR; $MI; $x" -c "EXPLAIN (ANALYZE, TIMING OFF) $QI" > $OUT/explain-$name-int8.txt 2>&1
	pgsql -c "$PAR; $MI; $x" -c "EXPLAIN (ANALYZE, TIMING OFF) $QT" > $OUT/explain-$name-text.txt 2>&1
	pgsql -c "$PAR; $M64; $x" -c "EXPLAIN (ANALYZE, TIMING OFF) $QI" > $OUT/explain-$name-64mb.txt 2>&1
}
t "$PAR; $MI" "$QI" >/dev/null
row PostgreSQL "SET gpusort.enabled=off" 2
row "old $OLDC" "" 3
expl old
# CANCEL_CONFIGS: bench/cancel.sh's CONFIGS, run on each side (CANCEL_TIMEOUTS)
cancel() { [ -n "${CANCEL_CONFIGS:-}" ] || return 0
	CONFIGS=$CANCEL_CONFIGS TIMEOUTS=${CANCEL_TIMEOUTS:-300 700 1000 1500 2000} SIDES=$2 TABLE=g50 \
		bash bench/cancel.sh > $OUT/cancel-$1.md 2>&1; say "cancel $1"; }
cancel old "PostgreSQL gpusort"
gs_ab_install .
pg_restart $GS_AB_SETTINGS
t "$PAR; $MI" "$QI" >/dev/null
row "new $NEWC" "" 3
expl new
cancel new gpusort
# NEW_VARIANT: settings of one more row of the new side (an A/B within it);
# NEW_VARIANTS: several such, separated by "|"
if [ -n "${NEW_VARIANT:-}" ]; then row "new $NEWC, $NEW_VARIANT" "$NEW_VARIANT" 3; fi
IFS='|' read -r -a nvs <<<"${NEW_VARIANTS:-}"
for v in "${nvs[@]}"; do [ -n "$v" ] && row "new $NEWC, $v" "$v" 3; done
cat $res $OUT/cancel-*.md 2>/dev/null
for f in $OUT/explain-*; do echo "## $f"; grep -E "GpuSort|Leader Load|Collect|Execution|Copied" $f; done > $OUT/explains.txt
say done
