# Sourced by bench/gpu-run.sh and bench/gpu-50m.sh on the GPU machine, after
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
