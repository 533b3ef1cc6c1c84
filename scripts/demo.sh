#!/usr/bin/env bash
# Show gpusort sorting a few million rows, beside PostgreSQL's own sort.
#
#   scripts/demo.sh [ROWS [VERSION]]     (default 2000000 rows, PostgreSQL 15)
#
# Installs the Debian packages that are missing, builds and installs the
# extension (with the CUDA engine when the CUDA toolkit is installed), starts
# a throwaway cluster of PostgreSQL VERSION (15, 17 or 18) that preloads
# gpusort and otherwise keeps PostgreSQL's default settings (removed again at
# the end), creates a table of ROWS rows, and times ORDER BY on an int8 key
# and on a text key, PostgreSQL's Sort against gpusort, at PostgreSQL's
# default settings and at work_mem 1GB (bench/run.sh: the median of 3 runs
# each way, alternating, both ways checked to return the same rows in the
# same order).  It prints one line per step with its time, and the table;
# the compiler output, the package installation and EXPLAIN ANALYZE of both
# plans go to log files in a folder whose path it prints.
#
# Without a GPU (or without the CUDA toolkit at build time) gpusort uses its
# CPU engine.  Versions that the host's Debian release does not carry (17 and
# 18 on Debian 12) run inside the same throwaway root file system as
# scripts/test.sh uses, without CUDA.

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage="usage: scripts/demo.sh [ROWS [VERSION]]  (versions: $GS_VERSIONS)"
rows=${1:-2000000}
export PG_MAJOR=${2:-15}
case "$rows" in ''|*[!0-9]*) gs_die "$usage" ;; esac
[ "$rows" -ge 100000 ] || gs_die "ROWS must be 100000 or more (gpusort leaves small sorts to PostgreSQL)"
case " $GS_VERSIONS " in
	*" $PG_MAJOR "*) ;;
	*) gs_die "$usage" ;;
esac

# "2,000,000"
gs_commas()
{
	echo "$1" | sed -e ':a' -e 's/\([0-9]\)\([0-9]\{3\}\)\($\|,\)/\1,\2\3/' -e 'ta'
}

# one line per step: its name, its time, what it did
gs_step()
{
	printf '  %-9s %5s  %s\n' "$1" "$(($(date +%s) - $2)) s" "$3"
}

# ---- inside the cluster: gpusort_info, the data, the timings ----
if [ "${3:-}" = --in-cluster ]; then
	gs_find_pg_config
	log=$GS_DEMO_DIR/demo.log
	psql_demo()
	{
		"$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -P pager=off "$@"
	}
	export PGOPTIONS="-c client_min_messages=warning"
	gs_step cluster "$GS_DEMO_T" "a throwaway PostgreSQL $PG_MAJOR cluster: gpusort preloaded, fsync off, PostgreSQL's defaults otherwise"

	t=$(date +%s)
	psql_demo -c "CREATE EXTENSION gpusort" >>"$log"
	engine=$(psql_demo -At -F ' ' -c "SELECT name, value FROM gpusort_info()" | tee -a "$log" |
		awk '$1 == "engine" { e = $2 } $1 == "device" { $1 = ""; d = substr($0, 2) }
			$1 == "cuda_error" { $1 = ""; why = substr($0, 2) }
			END { if (e == "cpu" && why ~ /^no GPU/) d = why; print e " (" d ")" }')
	gs_step engine "$t" "large sorts run on: $engine"

	# the table, made in the background by bench/run.sh in 8 slices; the
	# slices show up in pg_class as they are done
	t=$(date +%s)
	table=gsb_n_$rows
	"$GS_ROOT/bench/run.sh" --rows "$rows" --kinds full --keys i8u,tx --widths narrow \
		--data-only --out "$GS_DEMO_DIR/data" >>"$log" 2>&1 &
	gen=$!
	while kill -0 "$gen" 2>/dev/null; do
		if [ "${GS_DEMO_TTY:-}" = 1 ]; then
			progress=$(psql_demo -At -c "SELECT CASE WHEN count(*) FILTER (WHERE relname = '$table') > 0
					THEN 'combining the slices into $table, VACUUM ANALYZE'
					ELSE count(*) || ' of 8 slices done' END
				FROM pg_class WHERE relname LIKE 'gsb\\_slice%\\_$rows' OR relname = '$table'" 2>/dev/null || true)
			printf '\r\033[K  %-9s %5s  generating %s rows: %s' data \
				"$(($(date +%s) - t)) s" "$(gs_commas "$rows")" "$progress" >&3
		fi
		sleep 2
	done
	[ "${GS_DEMO_TTY:-}" = 1 ] && printf '\r\033[K' >&3
	wait "$gen" || gs_die "generating the data failed: see $log"
	size=$(psql_demo -At -c "SELECT pg_size_pretty(pg_relation_size('$table'))")
	gs_step data "$t" "$table: $(gs_commas "$rows") rows, $size (int8, md5 text in the C collation, float8, timestamp, ...)"

	# the plans, for the log
	for s in on off; do
		echo "== EXPLAIN ANALYZE, gpusort.enabled = $s, default settings" >>"$log"
		psql_demo -c "SET gpusort.enabled = $s" \
			-c "EXPLAIN (ANALYZE) SELECT id, i8u FROM $table ORDER BY i8u OFFSET $rows" >>"$log"
	done

	# the timings: one bench/run.sh per setting
	declare -A line
	floor_int8=0 floor_text=0
	for setting in default 1GB; do
		t=$(date +%s)
		sets=()
		[ "$setting" = default ] || sets=(--set "work_mem=$setting")
		out=$GS_DEMO_DIR/bench-$setting
		"$GS_ROOT/bench/run.sh" --rows "$rows" --kinds full --keys i8u,tx --widths narrow \
			--runs 3 "${sets[@]}" --out "$out" >>"$log" 2>&1 ||
			gs_die "bench/run.sh failed: see $log and $out"
		while IFS=, read -r _ kind key _ pg gs sp fl _ _ _ inplan same _; do
			[ "$kind" = scan ] || [ "$same" = yes ] ||
				gs_die "gpusort and PostgreSQL returned different rows ($kind $key): see $out"
			case "$setting:$kind:$key" in
				default:scan:i8u) floor_int8=$pg ;;
				default:scan:tx) floor_text=$pg ;;
				*:scan:*) ;;
				*:full:i8u) line[$setting:int8]=$(printf '%10.0f %10.0f %8s' "$pg" "$gs" "$sp×") ;;
				*:full:tx) line[$setting:text]=$(printf '%10.0f %10.0f %8s' "$pg" "$gs" "$sp×") ;;
			esac
			[ "$kind" = scan ] || [ "$inplan" = yes ] ||
				echo "  note: no GpuSort in the plan of $kind $key (see $out/log)"
		done < <(tail -n +2 "$out/results.csv")
		name=work_mem
		[ "$setting" = default ] && name=defaults
		gs_step "$name" "$t" "timed ORDER BY int8 and text, work_mem ${setting/default/4MB}: 3 runs each way, same rows checked"
	done

	n=$(gs_commas "$rows")
	echo
	printf '%-44s %10s %10s %8s\n' "ORDER BY one key, $n rows (ms)" "PostgreSQL" gpusort speedup
	echo "PostgreSQL's default settings (work_mem 4MB, 2 parallel workers):"
	printf '  %-42s %s\n' "int8 key" "${line[default:int8]}" "text key (COLLATE \"C\")" "${line[default:text]}"
	echo "work_mem 1GB (both sorts fit in memory):"
	printf '  %-42s %s\n' "int8 key" "${line[1GB:int8]}" "text key (COLLATE \"C\")" "${line[1GB:text]}"
	printf 'the floor, the same SELECTs without ORDER BY: %.0f ms (int8), %.0f ms (text)\n' \
		"$floor_int8" "$floor_text"
	echo "(SELECT id, key FROM $table ORDER BY key OFFSET $rows: every row sorted and consumed in"
	echo " the server; median of 3 runs; speedup = PostgreSQL's time / gpusort's)"
	exit 0
fi

if [ "${3:-}" != --local ] && ! gs_runs_on_host "$PG_MAJOR"; then
	gs_log "PostgreSQL $PG_MAJOR: in a $(gs_suite "$PG_MAJOR") root file system"
	gs_in_overlay "$PG_MAJOR" gs_run_tree_in_chroot "$PG_MAJOR" /dev/null \
		scripts/demo.sh "$rows" "$PG_MAJOR" --local
	exit
fi

start=$(date +%s)
GS_DEMO_DIR=$(mktemp -d "${TMPDIR:-/tmp}/gpusort-demo.XXXXXX")
chmod 755 "$GS_DEMO_DIR"
export GS_DEMO_DIR
echo "gpusort demo: $(gs_commas "$rows") rows on PostgreSQL $PG_MAJOR; logs in $GS_DEMO_DIR"

t=$(date +%s)
if ! gs_install_packages >"$GS_DEMO_DIR/packages.log" 2>&1; then
	tail -n 20 "$GS_DEMO_DIR/packages.log"
	gs_die "installing the Debian packages failed: see $GS_DEMO_DIR/packages.log"
fi
gs_step packages "$t" "$(sed -n 's/^==> packages: //p' "$GS_DEMO_DIR/packages.log" | tail -n 1)"

t=$(date +%s)
if ! gs_build_install "$GS_ROOT" >"$GS_DEMO_DIR/build.log" 2>&1; then
	tail -n 20 "$GS_DEMO_DIR/build.log"
	gs_die "the build failed: see $GS_DEMO_DIR/build.log"
fi
if [ -f "$GS_ROOT/cuda/libgpusort_cuda.so" ]; then
	what="CPU and CUDA engines"
else
	what="CPU engine only (no CUDA toolkit found)"
fi
gs_step build "$t" "make and make install: $what; compiler output in $GS_DEMO_DIR/build.log"

# the data step's progress line goes straight to a terminal (fd 3), past
# the filter that drops pg_virtualenv's own messages
GS_DEMO_TTY=
[ -t 1 ] && GS_DEMO_TTY=1
export GS_DEMO_TTY GS_DEMO_T=$(date +%s)
set +e
{
	gs_in_cluster bash "$GS_ROOT/scripts/demo.sh" "$rows" "$PG_MAJOR" --in-cluster 3>&5 2>&1 |
		grep -v -e '^Dropping cluster' -e '^Creating new PostgreSQL cluster'
	rc=${PIPESTATUS[0]}
} 5>&1
set -e
echo "total: $(($(date +%s) - start)) s; EXPLAIN ANALYZE of both plans: $GS_DEMO_DIR/demo.log"
exit "$rc"
