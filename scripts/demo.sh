#!/usr/bin/env bash
# Show gpusort sorting a few million rows, beside PostgreSQL's own sort.
#
#   scripts/demo.sh [ROWS [VERSION]]     (default 3000000 rows, PostgreSQL 15)
#
# Installs the Debian packages that are missing, builds and installs the
# extension, starts a throwaway cluster of PostgreSQL VERSION (15, 17 or 18)
# that preloads gpusort (removed again at the end), creates a table of ROWS
# rows, and shows:
#   - gpusort_info(): the engine and device gpusort would use here;
#   - EXPLAIN ANALYZE of an ORDER BY with gpusort (Custom Scan (GpuSort)) and
#     with SET gpusort.enabled = off (PostgreSQL's Sort);
#   - a timing table (bench/run.sh: median of 3 runs each way, alternating,
#     results checked to be equal) with the ratio.
# Without a GPU (or without the CUDA toolkit at build time) gpusort uses its
# CPU engine.  Versions that the host's Debian release does not carry (17 and
# 18 on Debian 12) run inside the same throwaway root file system as
# scripts/test.sh uses, without CUDA.

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

rows=${1:-3000000}
export PG_MAJOR=${2:-15}
case "$rows" in ''|*[!0-9]*) gs_die "usage: scripts/demo.sh [ROWS [VERSION]]" ;; esac
case " $GS_VERSIONS " in
	*" $PG_MAJOR "*) ;;
	*) gs_die "usage: scripts/demo.sh [ROWS [VERSION]]  (versions: $GS_VERSIONS)" ;;
esac

if [ "${3:-}" = --in-cluster ]; then
	psql_demo()
	{
		"$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -P pager=off "$@"
	}
	gs_find_pg_config
	export PGOPTIONS="-c client_min_messages=warning"
	out=$(mktemp -d "${TMPDIR:-/tmp}/gpusort-demo.XXXXXX")
	table=gsb_n_$rows
	query="SELECT id, i8u, tx FROM $table ORDER BY i8u"

	gs_log "what gpusort sees here: SELECT * FROM gpusort_info()"
	psql_demo -c "CREATE EXTENSION gpusort" -c "SELECT * FROM gpusort_info()"

	gs_log "creating $table: $rows rows (int8, text, float8, timestamp, ... columns; fixed seeds)"
	"$GS_ROOT/bench/run.sh" --rows "$rows" --kinds full --keys i8u,tx --widths narrow \
		--data-only --out "$out" >/dev/null
	psql_demo -Atc "SELECT 'table $table: $rows rows, ' ||
		pg_size_pretty(pg_relation_size('$table'))"

	gs_log "gpusort on (the default): $query  (work_mem 1GB)"
	psql_demo -c "SET work_mem = '1GB'" -c "EXPLAIN (ANALYZE) $query"

	gs_log "gpusort off (SET gpusort.enabled = off): PostgreSQL's own Sort"
	psql_demo -c "SET work_mem = '1GB'" -c "SET gpusort.enabled = off" \
		-c "EXPLAIN (ANALYZE) $query"

	gs_log "timing: SELECT id, <key> FROM $table ORDER BY <key> OFFSET $rows (rows consumed in the server)"
	"$GS_ROOT/bench/run.sh" --rows "$rows" --kinds full --keys i8u,tx --widths narrow \
		--runs 3 --set work_mem=1GB --out "$out" | sed -n '/^| rows/,/^$/p'
	echo "(speedup = PostgreSQL ms / gpusort ms; the scan floor is the same SELECT without ORDER BY)"
	rm -rf "$out"
	exit 0
fi

if [ "${3:-}" != --local ] && ! gs_runs_on_host "$PG_MAJOR"; then
	gs_log "PostgreSQL $PG_MAJOR: in a $(gs_suite "$PG_MAJOR") root file system"
	gs_in_overlay "$PG_MAJOR" gs_run_tree_in_chroot "$PG_MAJOR" /dev/null \
		scripts/demo.sh "$rows" "$PG_MAJOR" --local
	exit
fi

gs_install_packages
gs_build_install "$GS_ROOT"
# jit off keeps the plans short; both ways run under the same settings
GS_CLUSTER_OPTS=(shared_buffers=1GB max_wal_size=8GB jit=off)
gs_in_cluster bash "$GS_ROOT/scripts/demo.sh" "$rows" "$PG_MAJOR" --in-cluster
