#!/usr/bin/env bash
# GPU machine, one call: the index builds of #14/#16 on 50M rows (g50 of
# bench/gpu-env.sh), each case as PostgreSQL's build, then gpusort's with
# its own page-by-page heap scan (gpusort.index_page_scan on), then with
# PostgreSQL's scan (off), in that order, with every DEBUG2 line of
# gpusort's builds kept: where the time goes.
#   run  command="OUT=$OUT bash bench/gpu-index-split.sh"  carry=[".gpu"]
# Results: $OUT/split.md (table), $OUT/splits.txt (DEBUG2 lines), $OUT/env.txt.
# Env: ROWS (default 50000000), CASES (default all, in this order:
# idx8_64 idx8_1g idx0_64 idx0_1g reindex3), VARIANTS (default "on off"),
# DEADLINE seconds after which no statement starts (default 480).
set -uo pipefail
T0=$(date +%s)
say() { echo "== [$(($(date +%s) - T0))s] $*"; }
left() { echo $((DEADLINE - ($(date +%s) - T0))); }
ROWS=${ROWS:-50000000}
DEADLINE=${DEADLINE:-480}
CASES=${CASES:-idx8_64 idx8_1g idx0_64 idx0_1g reindex3}
VARIANTS=${VARIANTS:-on off}
OUT=${OUT:-/tmp/gpu-index-split}
mkdir -p "$OUT"

# shellcheck disable=SC1091
source .gpu/pg-up.sh .gpu/debs >"$OUT/pgup.log" 2>&1
# shellcheck disable=SC1091
source bench/gpu-env.sh

say "build and data, at once"
(gs_ab_data >"$OUT/data.log" 2>&1) &
datapid=$!
(timeout 300 make -j12 PG_CONFIG="$PG_CONFIG" with_llvm=no all >"$OUT/build.log" 2>&1)
ls gpusort.so >/dev/null || { tail -20 "$OUT/build.log"; exit 1; }
wait $datapid
make PG_CONFIG="$PG_CONFIG" with_llvm=no install >/dev/null 2>&1 || { echo "install failed"; exit 1; }
# shellcheck disable=SC2086
pg_restart $GS_AB_SETTINGS || exit 1
pgsql -qc "CREATE EXTENSION IF NOT EXISTS gpusort"
{
	nproc
	grep -i huge /proc/meminfo
	pgsql -Atc "SELECT name || '=' || setting FROM pg_settings WHERE name IN ('huge_pages', 'shared_buffers', 'max_worker_processes')"
	pgsql -Atc "SELECT name || '=' || value FROM gpusort_info()"
	pgsql -Atc "SELECT pg_size_pretty(pg_table_size('g50')), count(*) FROM g50"
} >"$OUT/env.txt" 2>&1
say "built; $(tail -1 "$OUT/env.txt")"

CI="DROP INDEX IF EXISTS g50_s; CREATE INDEX g50_s ON g50(k)"
declare -A CASE=(
	[idx8_64]="SET max_parallel_maintenance_workers = 8; SET maintenance_work_mem = '64MB'|$CI"
	[idx8_1g]="SET max_parallel_maintenance_workers = 8; SET maintenance_work_mem = '1GB'|$CI"
	[idx0_64]="SET max_parallel_maintenance_workers = 0; SET maintenance_work_mem = '64MB'|$CI"
	[idx0_1g]="SET max_parallel_maintenance_workers = 0; SET maintenance_work_mem = '1GB'|$CI"
	[reindex3]="SET maintenance_work_mem = '1GB'|REINDEX TABLE g50"
)
declare -A RES

# one timed statement: $1 variant (PostgreSQL, on, off), $2 case
t() {
	local v=$1 c=$2 set=${CASE[$2]%%|*} q=${CASE[$2]#*|} s e extra
	[ "$(left)" -gt 0 ] || { RES[$v,$c]="skipped"; return; }
	case $v in
		PostgreSQL) extra="SET gpusort.enabled = off" ;;
		*) extra="SET gpusort.index_page_scan = $v; SET client_min_messages = debug2" ;;
	esac
	echo "$v $c: before: $(grep -E '^(Dirty|Writeback):' /proc/meminfo | tr -s ' ' | tr '\n' ' ')" >>"$OUT/splits.txt"
	s=$(date +%s%N)
	pgsql -q -c "$extra; $set" -c "$q" >/dev/null 2>"$OUT/stmt.err"
	e=$(( ($(date +%s%N) - s) / 1000000 ))
	grep -q ERROR "$OUT/stmt.err" && { e="ERR"; cat "$OUT/stmt.err" >>"$OUT/errors.txt"; }
	grep -h "gpusort index\|built by" "$OUT/stmt.err" | sed "s/^/$v $c: /" >>"$OUT/splits.txt"
	RES[$v,$c]=$e
	say "$v $c: $e ms"
}

t on idx8_1g
for c in $CASES; do
	if [ "$c" = reindex3 ]; then
		pgsql -q -c "DROP INDEX IF EXISTS g50_s" -c "SET maintenance_work_mem = '1GB'" \
			-c "CREATE INDEX IF NOT EXISTS g50_r1 ON g50 (k)" \
			-c "CREATE INDEX IF NOT EXISTS g50_r2 ON g50 (id)" \
			-c "CREATE INDEX IF NOT EXISTS g50_r3 ON g50 (id, k)"
	fi
	t PostgreSQL "$c"
	for v in $VARIANTS; do t "$v" "$c"; done
done

{
	echo "| case | PostgreSQL ms | $(for v in $VARIANTS; do printf 'page_scan=%s ms | ' "$v"; done)$(for v in $VARIANTS; do printf '%s speedup | ' "$v"; done)"
	echo "| --- | ---: |$(for v in $VARIANTS; do printf ' ---: | ---: |'; done)"
	for c in $CASES; do
		p=${RES[PostgreSQL,$c]:-}
		printf '| %s | %s | ' "$c" "$p"
		for v in $VARIANTS; do printf '%s | ' "${RES[$v,$c]:-}"; done
		for v in $VARIANTS; do
			awk -v p="$p" -v x="${RES[$v,$c]:-}" 'BEGIN {if (p+0 > 0 && x+0 > 0) printf "%.2fx | ", p / x; else printf "- | "}'
		done
		echo
	done
} >"$OUT/split.md"
cat "$OUT/split.md"
cat "$OUT/env.txt"
say done
