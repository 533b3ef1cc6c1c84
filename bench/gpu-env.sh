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
