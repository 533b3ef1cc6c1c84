#!/usr/bin/env bash
# GPU machine: A/B of CREATE INDEX with 8 workers at maintenance_work_mem 1GB and 64MB, with each build's DEBUG2 split.
# The old side is a source tree in .gpu/old (git-ignored), made with
#   rm -rf .gpu/old && mkdir -p .gpu/old && git archive <commit> | tar x -C .gpu/old
#   run  command="bash bench/gpu-ab-index.sh"  carry=[".gpu"]
set -uo pipefail
T0=$(date +%s)
say() { echo "== [$(($(date +%s) - T0))s] $*"; }
ROWS=${ROWS:-50000000}
source .gpu/pg-up.sh .gpu/debs -c shared_buffers=32GB >$OUT/pgup.log 2>&1
source bench/gpu-env.sh
say build
gs_ab_build old
say data
gs_ab_data
say "data ready"
t() { local s=$(date +%s%N); pgsql -q -c "$1" -c "$2" >/dev/null 2>>$OUT/err.log; echo $(( ($(date +%s%N)-s)/1000000 )); }
CI="CREATE INDEX g50_s ON g50(k); DROP INDEX g50_s"
I1="SET max_parallel_maintenance_workers=8; SET maintenance_work_mem='1GB'"
I64="SET max_parallel_maintenance_workers=8; SET maintenance_work_mem='64MB'"
res=$OUT/abidx.md
echo "| variant | 8 workers, 1GB ms | 8 workers, 64MB ms |" > $res
echo "| --- | ---: | ---: |" >> $res
echo "| PostgreSQL | $(t "$I1; SET gpusort.enabled=off" "$CI") | $(t "$I64; SET gpusort.enabled=off" "$CI") |" >> $res
say pg
v() { local a1 b1 a2 b2
	a1=$(t "$I1" "$CI"); b1=$(t "$I64" "$CI"); a2=$(t "$I1" "$CI"); b2=$(t "$I64" "$CI")
	echo "| $1 | $a1, $a2 | $b1, $b2 |" >> $res
	pgsql -c "SET client_min_messages=debug2; $I1" -c "$CI" 2>&1 | grep "gpusort index" >> $OUT/splits-$1.txt
	pgsql -c "SET client_min_messages=debug2; $I64" -c "$CI" 2>&1 | grep "gpusort index" >> $OUT/splits-$1.txt
	say "$1"
}
v old
gs_ab_install .
pg_restart $GS_AB_SETTINGS
v new
cat $res
say done
