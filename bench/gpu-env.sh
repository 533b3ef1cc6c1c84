# Sourced by the bench/gpu-*.sh scripts on the GPU machine, after
# .gpu/pg-up.sh: PostgreSQL's server headers include ICU's, which
# fetch-debs.sh does not fetch, so carry libicu-dev's .deb in .gpu/debs
# (cd .gpu/debs && apt-get download libicu-dev) and build against it.
if [ ! -f /opt/pgroot/usr/include/unicode/ucol.h ]; then
	for f in .gpu/debs/libicu-dev_*.deb; do
		[ -f "$f" ] && dpkg -x "$f" /opt/pgroot
	done
fi
export CPATH=/opt/pgroot/usr/include${CPATH:+:$CPATH}
export LIBRARY_PATH=/opt/pgroot/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}

# Build, install and preload gpusort unless the server already has it (a
# machine still warm from an earlier pass); exits the calling script when
# that fails, so call it outside any pipeline.  $1: shared_buffers for the
# restart.  Uses the caller's say().
gs_bench_gpusort()
{
	if ! pgsql -Atc "SELECT 1 FROM pg_extension WHERE extname = 'gpusort'" | grep -q 1; then
		say "building gpusort"
		make -j"$(nproc)" PG_CONFIG="$PG_CONFIG" with_llvm=no all &&
			make PG_CONFIG="$PG_CONFIG" with_llvm=no install || exit 1
		# fd 3 is the caller's terminal: a server holding it would keep
		# whoever reads the script's output waiting after the script ends
		pg_restart -c shared_buffers="$1" -c shared_preload_libraries=gpusort 3>&- || exit 1
		pgsql -c "CREATE EXTENSION gpusort" || exit 1
	fi
}

# The A/B scripts' setup (bench/gpu-ab.sh, gpu-ab-index.sh, gpu-timeline.sh).
# Server settings of their restarts: room for 8 workers and the service.
GS_AB_SETTINGS="-c shared_buffers=32GB -c shared_preload_libraries=gpusort -c dynamic_shared_memory_type=posix -c max_worker_processes=24 -c max_parallel_workers=16"

# install the build in directory $1 (. or .gpu/old)
gs_ab_install()
{
	(cd "$1" && make PG_CONFIG="$PG_CONFIG" with_llvm=no install >/dev/null 2>&1) ||
		echo "install $1 failed"
}

# build this tree and, with $1 = old, .gpu/old beside it (logs in $OUT);
# install the old one if built, else this one; restart preloading it
gs_ab_build()
{
	(timeout 300 make -j16 PG_CONFIG="$PG_CONFIG" with_llvm=no all >"$OUT/build.log" 2>&1) &
	if [ "${1:-}" = old ]; then
		(cd .gpu/old && timeout 300 make -j16 PG_CONFIG="$PG_CONFIG" with_llvm=no all >"$OUT/build-old.log" 2>&1) &
	fi
	wait
	ls gpusort.so >/dev/null || { tail -20 "$OUT/build.log"; exit 1; }
	if [ "${1:-}" = old ]; then
		ls .gpu/old/gpusort.so >/dev/null || { tail -20 "$OUT/build-old.log"; exit 1; }
		gs_ab_install .gpu/old
	else
		gs_ab_install .
	fi
	# shellcheck disable=SC2086
	pg_restart $GS_AB_SETTINGS
	pgsql -qc "CREATE EXTENSION IF NOT EXISTS gpusort"
}

# the 50M-row table of bench/gpu-50m.sh ($ROWS rows), unless it is there
gs_ab_data()
{
	pgsql -q <<SQL
SET max_parallel_workers_per_gather = 0;
SELECT setseed(0.42);
CREATE UNLOGGED TABLE IF NOT EXISTS g50 AS
	SELECT (random() * 9.2e18 - 4.6e18)::int8 AS k, g::int4 AS id, md5(g::text) COLLATE "C" AS t
	FROM generate_series(1, $ROWS) g;
VACUUM ANALYZE g50;
ALTER TABLE g50 SET (parallel_workers = 8);
SQL
}

# The single-tree scripts' setup (bench/gpu-index-split.sh, gpu-perf.sh):
# the table loaded while this tree builds (logs in $OUT), then installed,
# the server restarted with GS_AB_SETTINGS and the extension created;
# exits the calling script when that fails.
gs_bench_setup()
{
	local datapid
	(gs_ab_data >"$OUT/data.log" 2>&1) &
	datapid=$!
	(timeout 300 make -j12 PG_CONFIG="$PG_CONFIG" with_llvm=no all >"$OUT/build.log" 2>&1)
	ls gpusort.so >/dev/null || { tail -20 "$OUT/build.log"; exit 1; }
	wait $datapid
	make PG_CONFIG="$PG_CONFIG" with_llvm=no install >/dev/null 2>&1 || { echo "install failed"; exit 1; }
	# shellcheck disable=SC2086
	pg_restart $GS_AB_SETTINGS || exit 1
	pgsql -qc "CREATE EXTENSION IF NOT EXISTS gpusort"
}
