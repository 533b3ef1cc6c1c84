# Sourced by test/index/*.sh: run the calling script again inside a throwaway
# cluster that preloads gpusort, and the helpers those scripts share.
#
#   source "$(dirname "$0")/lib.sh"
#   gs_reexec_in_cluster "$0" "$@"     # returns only inside the cluster
#
# GS_TEST_LIBDIR, when set, is put first in dynamic_library_path (to test a
# gpusort.so that is not installed).  Inside the cluster $GS_PG_MAJOR is the
# server's major version.

gs_reexec_in_cluster()
{
	local script=$1 pg_config major opts

	shift
	if [ "${1:-}" = --in-cluster ]; then
		GS_PG_MAJOR=$2
		# gpusort builds indexes only where the extension exists
		psql -X -q -v ON_ERROR_STOP=1 -c "SET client_min_messages = warning" \
			-c "CREATE EXTENSION IF NOT EXISTS gpusort" ||
			fail "could not create the extension gpusort"
		return 0
	fi
	pg_config=${PG_CONFIG:-pg_config}
	major=$("$pg_config" --version | sed -E 's/^[^0-9]*([0-9]+).*/\1/')
	opts=(-o shared_preload_libraries=gpusort)
	if [ -n "${GS_TEST_LIBDIR:-}" ]; then
		opts+=(-o "dynamic_library_path=$GS_TEST_LIBDIR:\$libdir")
	fi
	exec pg_virtualenv -t -v "$major" -i '--no-locale -E UTF8' "${opts[@]}" \
		"$script" --in-cluster "$major"
}

fail() { echo "FAIL: $*" >&2; exit 1; }
q() { psql -X -q -v ON_ERROR_STOP=1 -At "$@"; }
