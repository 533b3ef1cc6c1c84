#!/usr/bin/env bash
# GPU machine: a timeline of the leader's own thread (perf samples in 100 ms buckets, top symbols) for the parallel ORDER BY int8 and text cases.
# Needs .gpu/perf.tar.xz (a perf build with its libraries).
#   run  command="bash bench/gpu-timeline.sh"  carry=[".gpu"]
set -uo pipefail
T0=$(date +%s)
say() { echo "== [$(($(date +%s) - T0))s] $*"; }
ROWS=${ROWS:-50000000}
source .gpu/pg-up.sh .gpu/debs -c shared_buffers=32GB >$OUT/pgup.log 2>&1
source bench/gpu-env.sh
say build
gs_ab_build
say data
gs_ab_data
say "data ready"
[ -d /tmp/perfpkg ] || (cd /tmp && tar xJf $OLDPWD/.gpu/perf.tar.xz)
PERF="env LD_LIBRARY_PATH=/tmp/perfpkg/lib:${LD_LIBRARY_PATH:-} /tmp/perfpkg/perf"
PAR="SET max_parallel_workers_per_gather = 8; SET max_parallel_workers = 8; SET gpusort.parallel_load_mem = '64GB'"
QI="SELECT * FROM g50 ORDER BY k OFFSET $ROWS"
QT="SELECT * FROM g50 ORDER BY t OFFSET $ROWS"
t() { local s=$(date +%s%N); pgsql -q -c "$1" -c "$2" >/dev/null 2>>$OUT/err.log; echo $(( ($(date +%s%N)-s)/1000000 )); }
t "$PAR; SET work_mem='16GB'" "$QI" >/dev/null
for i in 1 2 3; do echo "int8 $(t "$PAR; SET work_mem='16GB'" "$QI") text $(t "$PAR; SET work_mem='16GB'" "$QT")"; done > $OUT/times.txt
tl() { local name=$1 sets=$2 q=$3
	pgsql -Atq > /tmp/pid.$name <<SQL &
SELECT pg_backend_pid();
SELECT pg_sleep(2);
$sets;
$q;
SQL
	sleep 1; local pid=$(head -1 /tmp/pid.$name)
	$PERF record -F 2999 -t $pid -o /tmp/perf.$name -- sleep 12 >/dev/null 2>&1
	wait
	echo "## $name pid $pid" >> $OUT/timeline.txt
	$PERF script -i /tmp/perf.$name -F time,ip,sym 2>/dev/null | awk '
		{ t = $1; sub(/:$/, "", t); t += 0; if (!t0) t0 = t; b = int((t - t0) * 10); sym = $3; c[b " " sym]++ }
		END { for (k in c) { split(k, a, " "); print a[1], c[k], a[2] } }' | sort -k1,1n -k2,2nr | awk 'BEGIN { last = -1 } { if ($1 != last) { printf "\n%5.1fs:", $1 / 10; k = 0; last = $1 } if (k++ < 4) printf " %s(%d)", $3, $2 }' >> $OUT/timeline.txt
	echo >> $OUT/timeline.txt
}
tl int8 "$PAR; SET work_mem='16GB'" "$QI"
tl text "$PAR; SET work_mem='16GB'" "$QT"
cat $OUT/times.txt
say done
