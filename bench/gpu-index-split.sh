#!/usr/bin/env bash
# GPU machine, one call: the index builds of #14/#16 on 50M rows (g50 of
# bench/gpu-env.sh), each case as PostgreSQL's build, then gpusort's with
# its own page-by-page heap scans (gpusort.index_page_scan and
# gpusort.load_page_scan on), then with PostgreSQL's scans (off), in that
# order, with every DEBUG2 line of
# gpusort's builds kept: where the time goes.  The ORDER BY cases of #16
# (ext: int8 with work_mem 64MB, mem: int8 in memory, text: md5 text in
# memory, all with 8 workers allowed on both sides) can be added to CASES;
# their EXPLAIN ANALYZE (gpusort's, after its runs) goes to $OUT/explain.txt.
#   run  command="OUT=$OUT bash bench/gpu-index-split.sh"  carry=[".gpu"]
# Results: $OUT/split.md (table), $OUT/splits.txt (DEBUG2 lines), $OUT/env.txt,
# $OUT/explain.txt, $OUT/logs.txt (setup logs), $OUT/errors.txt (if any).
# Env: ROWS (default 50000000), CASES (default, in this order:
# idx8_64 idx8_1g idx0_64 idx0_1g reindex3; also cluster: CLUSTER of a
# copy of g50 by a 1GB-built index on k, made again before each run, at
# the default max_parallel_maintenance_workers (2); cluster8: with 8),
# VARIANTS (default "on off"),
# RUNS (gpusort's runs of each variant, default 1; the table shows the
# median, the lower of two), FIRST (gpusort: its runs of a case before
# PostgreSQL's rather than after, which leaves them the memory a big
# PostgreSQL sort has just freed),
# DEADLINE seconds after which no statement starts (default 480).
set -uo pipefail
T0=$(date +%s)
say() { echo "== [$(($(date +%s) - T0))s] $*"; }
left() { echo $((DEADLINE - ($(date +%s) - T0))); }
ROWS=${ROWS:-50000000}
DEADLINE=${DEADLINE:-480}
CASES=${CASES:-idx8_64 idx8_1g idx0_64 idx0_1g reindex3}
VARIANTS=${VARIANTS:-on off}
RUNS=${RUNS:-1}
OUT=${OUT:-/tmp/gpu-index-split}
mkdir -p "$OUT"

# shellcheck disable=SC1091
source .gpu/pg-up.sh .gpu/debs >"$OUT/pgup.log" 2>&1
# shellcheck disable=SC1091
source bench/gpu-env.sh

say "build and data, at once"
gs_bench_setup
{
	nproc
	grep -i huge /proc/meminfo
	pgsql -Atc "SELECT name || '=' || setting FROM pg_settings WHERE name IN ('huge_pages', 'shared_buffers', 'max_worker_processes')"
	pgsql -Atc "SELECT name || '=' || value FROM gpusort_info()"
	pgsql -Atc "SELECT pg_size_pretty(pg_table_size('g50')), count(*) FROM g50"
} >"$OUT/env.txt" 2>&1
say "built; $(tail -1 "$OUT/env.txt")"

CI="DROP INDEX IF EXISTS g50_s; CREATE INDEX g50_s ON g50(k)"
PAR="SET max_parallel_workers_per_gather = 8; SET max_parallel_workers = 8; SET gpusort.parallel_load_mem = '64GB'"
declare -A CASE=(
	[ext]="$PAR; SET work_mem = '64MB'|SELECT * FROM g50 ORDER BY k OFFSET $ROWS"
	[mem]="$PAR; SET work_mem = '16GB'|SELECT * FROM g50 ORDER BY k OFFSET $ROWS"
	[text]="$PAR; SET work_mem = '16GB'|SELECT * FROM g50 ORDER BY t OFFSET $ROWS"
	[idx8_64]="SET max_parallel_maintenance_workers = 8; SET maintenance_work_mem = '64MB'|$CI"
	[idx8_1g]="SET max_parallel_maintenance_workers = 8; SET maintenance_work_mem = '1GB'|$CI"
	[idx0_64]="SET max_parallel_maintenance_workers = 0; SET maintenance_work_mem = '64MB'|$CI"
	[idx0_1g]="SET max_parallel_maintenance_workers = 0; SET maintenance_work_mem = '1GB'|$CI"
	[reindex3]="SET maintenance_work_mem = '1GB'|REINDEX TABLE g50"
	[cluster]="SET maintenance_work_mem = '1GB'|CLUSTER gc50 USING gc50_k"
	[cluster8]="SET max_parallel_maintenance_workers = 8; SET maintenance_work_mem = '1GB'|CLUSTER gc50 USING gc50_k"
)
# made again, untimed, before each timed run of a case
declare -A PREP=(
	[cluster]="DROP TABLE IF EXISTS gc50; CREATE UNLOGGED TABLE gc50 AS SELECT * FROM g50; SET maintenance_work_mem = '1GB'; CREATE INDEX gc50_k ON gc50 (k); VACUUM ANALYZE gc50"
)
PREP[cluster8]=${PREP[cluster]}
declare -A RES

# one timed statement: $1 variant (PostgreSQL, on, off), $2 case
t() {
	local v=$1 c=$2 set=${CASE[$2]%%|*} q=${CASE[$2]#*|} s e extra
	[ "$(left)" -gt 0 ] || { RES[$v,$c]="skipped"; return; }
	case $v in
		PostgreSQL) extra="SET gpusort.enabled = off" ;;
		*) extra="SET gpusort.index_page_scan = $v; SET gpusort.load_page_scan = $v; SET client_min_messages = debug2" ;;
	esac
	# one statement at a time: VACUUM cannot run in the implicit transaction of -c
	[ -n "${PREP[$c]:-}" ] && pgsql -q >/dev/null 2>>"$OUT/errors.txt" <<<"${PREP[$c]};"
	echo "$v $c: before: $(grep -E '^(Dirty|Writeback):' /proc/meminfo | tr -s ' ' | tr '\n' ' ')" >>"$OUT/splits.txt"
	s=$(date +%s%N)
	pgsql -q -c "$extra; $set" -c "$q" >/dev/null 2>"$OUT/stmt.err"
	e=$(( ($(date +%s%N) - s) / 1000000 ))
	grep -q ERROR "$OUT/stmt.err" && { e="ERR"; cat "$OUT/stmt.err" >>"$OUT/errors.txt"; }
	grep -h "gpusort index\|built by\|gpusort cluster\|sorted by" "$OUT/stmt.err" | sed "s/^/$v $c: /" >>"$OUT/splits.txt"
	RES[$v,$c]+="$e "
	say "$v $c: $e ms"
}

# EXPLAIN ANALYZE of an ORDER BY case, gpusort's: the time split
explain() {
	local c=$1 set=${CASE[$1]%%|*} q=${CASE[$1]#*|}
	[ "$(left)" -gt 0 ] || return
	{ echo "== $c"; pgsql -c "$set" -c "EXPLAIN (ANALYZE, TIMING OFF) $q"; } >>"$OUT/explain.txt" 2>&1
}
med() { printf '%s\n' "$@" | grep -E '^[0-9]+$' | sort -n | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "-"}'; }

t on idx8_1g
RES[on,idx8_1g]=""
for c in $CASES; do
	if [ "$c" = reindex3 ]; then
		pgsql -q -c "DROP INDEX IF EXISTS g50_s" -c "SET maintenance_work_mem = '1GB'" \
			-c "CREATE INDEX IF NOT EXISTS g50_r1 ON g50 (k)" \
			-c "CREATE INDEX IF NOT EXISTS g50_r2 ON g50 (id)" \
			-c "CREATE INDEX IF NOT EXISTS g50_r3 ON g50 (id, k)"
	fi
	[ "${FIRST:-}" = gpusort ] || t PostgreSQL "$c"
	for ((r = 0; r < RUNS; r++)); do
		for v in $VARIANTS; do t "$v" "$c"; done
	done
	[ "${FIRST:-}" = gpusort ] && t PostgreSQL "$c"
	case $c in ext|mem|text) explain "$c" ;; esac
done

{
	echo "| case | PostgreSQL ms | $(for v in $VARIANTS; do printf 'page_scan=%s ms | ' "$v"; done)$(for v in $VARIANTS; do printf '%s speedup | ' "$v"; done)"
	echo "| --- | ---: |$(for v in $VARIANTS; do printf ' ---: | ---: |'; done)"
	for c in $CASES; do
		# shellcheck disable=SC2086
		p=$(med ${RES[PostgreSQL,$c]:-})
		printf '| %s | %s | ' "$c" "$p"
		# shellcheck disable=SC2086
		for v in $VARIANTS; do printf '%s (%s) | ' "$(med ${RES[$v,$c]:-})" "${RES[$v,$c]:-}"; done
		for v in $VARIANTS; do
			# shellcheck disable=SC2086
			awk -v p="$p" -v x="$(med ${RES[$v,$c]:-})" 'BEGIN {if (p+0 > 0 && x+0 > 0) printf "%.2fx | ", p / x; else printf "- | "}'
		done
		echo
	done
} >"$OUT/split.md"
cat "$OUT/split.md"
cat "$OUT/env.txt"
grep -hE "^==|GpuSort|Workers|Load|Merge|Sort Time|Rows Copied|Execution" "$OUT"/explain.txt 2>/dev/null | head -40
# at most 8 files come back from the GPU machine: the logs in one
for f in pgup build data; do echo "== $f.log"; cat "$OUT/$f.log"; done >"$OUT/logs.txt" 2>&1
rm -f "$OUT/pgup.log" "$OUT/build.log" "$OUT/data.log" "$OUT/stmt.err"
say "done"
