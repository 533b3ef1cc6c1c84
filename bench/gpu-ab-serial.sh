#!/usr/bin/env bash
# GPU machine: A/B of a serial CREATE INDEX (no workers) at maintenance_work_mem 64MB on 50M rows:
# int8, unique int4 and text keys, PostgreSQL beside, each gpusort build's DEBUG2 split kept.
# The old side is a source tree in .gpu/old (git-ignored), made with
#   rm -rf .gpu/old && mkdir -p .gpu/old && git archive <commit> | tar x -C .gpu/old
#   run  command="bash bench/gpu-ab-serial.sh"  carry=[".gpu"]
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
S="SET max_parallel_maintenance_workers=0; SET maintenance_work_mem='64MB'"
# one build, timed; its DEBUG2 split into $OUT/splits-$3.txt
t() { local s=$(date +%s%N) e
	pgsql -q -c "SET client_min_messages=debug2; $S; $1" -c "$2" 2>$OUT/t.err >/dev/null
	e=$(( ($(date +%s%N)-s)/1000000 ))
	grep "gpusort index" $OUT/t.err >> $OUT/splits-$3.txt; grep ERROR $OUT/t.err >> $OUT/err.log
	echo $e; }
K="CREATE INDEX g50_s ON g50(k); DROP INDEX g50_s"
U="CREATE UNIQUE INDEX g50_s ON g50(id); DROP INDEX g50_s"
X="CREATE INDEX g50_s ON g50(t); DROP INDEX g50_s"
res=$OUT/abserial.md
echo "| variant | int8 ms | unique int4 ms | text ms |" > $res
echo "| --- | ---: | ---: | ---: |" >> $res
echo "| PostgreSQL | $(t "SET gpusort.enabled=off" "$K" pg) | $(t "SET gpusort.enabled=off" "$U" pg) | - |" >> $res
say pg
v() {
	if [ "$2" = all ]; then
		echo "| $1 | $(t "" "$K" $1) | $(t "" "$U" $1) | $(t "" "$X" $1) |" >> $res
	else
		echo "| $1 | $(t "" "$K" $1) | - | - |" >> $res
	fi
	say "$1"
}
v old all
gs_ab_install .
pg_restart $GS_AB_SETTINGS
v new all
gs_ab_install .gpu/old
pg_restart $GS_AB_SETTINGS
v old int8
gs_ab_install .
pg_restart $GS_AB_SETTINGS
v new int8
cat $res
say done
