# Helpers for the session tests (test/sessions/*.sh): tests that pg_regress
# cannot make, because they need a second session or a server restart.
#
# Each test runs against the server that the libpq environment (PGHOST,
# PGPORT, PGUSER, PGDATABASE, PGPASSWORD) names; it needs a superuser and
# gpusort preloaded, and a test that restarts the server must run as root or
# as the server's operating system user.  It prints what it checks and
# exits 0 when every check passed.  scripts/test.sh runs them in its
# throwaway cluster after pg_regress; by hand:
#
#   PGHOST=... PGPORT=... bash test/sessions/NAME.sh

set -u
GS_FAILED=0

gs_psql()
{
	psql -X -q -v ON_ERROR_STOP=1 -At "$@"
}

# check NAME GOT WANT
gs_expect()
{
	if [ "$2" = "$3" ]; then
		echo "ok: $1"
	else
		echo "FAILED: $1: got '$2', want '$3'"
		GS_FAILED=1
	fi
}

gs_done()
{
	exit $GS_FAILED
}

# gpusort takes sorts, index builds and CLUSTER only in a database where
# the extension exists: the tests' database gets it (the regression suite
# makes its own database, and the server keeps no other state)
gs_psql -c "SET client_min_messages = warning" \
	-c "CREATE EXTENSION IF NOT EXISTS gpusort" >/dev/null ||
	echo "(could not create the extension gpusort in the test database)"

# Immediate shutdown of the server (SIGQUIT to the postmaster, as
# pg_ctl stop -m immediate sends), then start it again the way it was
# started: the same command line, environment and user.  Works for any
# server, whoever manages it (pg_ctl, pg_ctlcluster, pg_virtualenv).
# Arguments: a command to run while the server is down, in its data
# directory.
gs_crash_restart()
{
	local datadir pid owner log i
	datadir=$(gs_psql -c 'SHOW data_directory') || return 1
	pid=$(head -n 1 "$datadir/postmaster.pid") || return 1
	owner=$(stat -c %U "/proc/$pid") || return 1
	local -a cmd env
	mapfile -d '' -t cmd <"/proc/$pid/cmdline"
	mapfile -d '' -t env <"/proc/$pid/environ"
	log=$(mktemp /tmp/gs-restart.XXXXXX.log)
	chown "$owner" "$log" 2>/dev/null
	kill -QUIT "$pid"
	for i in $(seq 1 600); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "the postmaster $pid did not exit"
		return 1
	fi
	if [ $# -gt 0 ]; then
		(cd "$datadir" && "$@") || return 1
	fi
	# cwd: the data directory (a relative -D would be relative to it).  The
	# whole background job writes to the log: a process left holding this
	# script's output (a pipe into the test runner) would keep the runner
	# waiting for as long as the server lives.
	if [ "$(id -un)" = "$owner" ]; then
		(cd "$datadir" && exec setsid env -i "${env[@]}" "${cmd[@]}") >>"$log" 2>&1 </dev/null &
	else
		(cd "$datadir" && exec setsid runuser -u "$owner" -- env -i "${env[@]}" "${cmd[@]}") >>"$log" 2>&1 </dev/null &
	fi
	disown 2>/dev/null || true
	for i in $(seq 1 600); do
		gs_psql -c 'SELECT 1' >/dev/null 2>&1 && { echo "restarted after recovery (log: $log)"; return 0; }
		sleep 0.1
	done
	echo "the server did not come back; its log ($log):"
	tail -n 30 "$log"
	return 1
}

# Shared memory segments of the server under test, and of no other server
# on the machine: a count of all of /dev/shm/PostgreSQL.* changes whenever
# another cluster runs a parallel query (CI failed so: "got '7', want '4'").
#
# gs_shm_snapshot notes this server's postmaster (the first line of
# postmaster.pid) and the segments that exist now.  gs_shm_segments then
# prints how many segments count as this server's and new: a segment
#  - that was not there at the snapshot (names are random 32-bit numbers),
#  - whose file belongs to the postmaster's operating system user,
#  - that no process other than the postmaster and its children (PPid =
#    the postmaster: backends, parallel and background workers) holds,
#    mapped (/proc/PID/maps) or open (/proc/PID/fd): a segment of ours is
#    held by our processes, or by none when it was left behind, which is
#    what the tests look for, while another server's is held by its
#    processes from shm_open to the last detach,
#  - and is so at two looks 0.2 s apart: another server's segment is held
#    by nobody only for an instant, between its last detach and its unlink.
# Run as root (as the test runner does) /proc shows every process's maps;
# as the server's user, another user's processes can't be read, but their
# segments belong to that user.
gs_shm_snapshot()
{
	local datadir
	datadir=$(gs_psql -c 'SHOW data_directory') || return 1
	GS_PM_PID=$(head -n 1 "$datadir/postmaster.pid") || return 1
	GS_SHM_BEFORE=$(gs_shm_list)
}

gs_shm_list()
{
	ls /dev/shm 2>/dev/null | grep -E '^PostgreSQL\.[0-9]+$' | LC_ALL=C sort
}

# the segments that a process not of this server maps or has open
gs_shm_foreign()
{
	local d stat rest
	local -a pids=() maps=() fds=()
	for d in /proc/[0-9]*; do
		[ "${d#/proc/}" = "$GS_PM_PID" ] && continue
		read -r stat 2>/dev/null <"$d/stat" || continue
		# after the command name (which may hold ") "): state, ppid
		rest=${stat##*) }
		rest=${rest#* }
		[ "${rest%% *}" = "$GS_PM_PID" ] && continue
		maps+=("$d/maps")
		fds+=("$d/fd")
	done
	{
		grep -ho '/dev/shm/PostgreSQL\.[0-9]*' "${maps[@]}" 2>/dev/null
		find "${fds[@]}" -maxdepth 1 -lname '/dev/shm/PostgreSQL.*' -printf '%l\n' 2>/dev/null
	} | sed 's|^/dev/shm/||; s/ .*//' | LC_ALL=C sort -u
}

# this server's segments made since gs_shm_snapshot (see above); prints a count
gs_shm_segments()
{
	local owner look s
	local -a looks=()
	owner=$(stat -c %U "/proc/$GS_PM_PID" 2>/dev/null) || { echo "no postmaster $GS_PM_PID"; return 1; }
	for look in 1 2; do
		[ "$look" = 2 ] && sleep 0.2
		looks+=("$(LC_ALL=C comm -23 <(gs_shm_list) <(echo "$GS_SHM_BEFORE") |
			LC_ALL=C comm -23 - <(gs_shm_foreign) |
			while read -r s; do
				[ "$(stat -c %U "/dev/shm/$s" 2>/dev/null)" = "$owner" ] && echo "$s"
			done)")
	done
	LC_ALL=C comm -12 <(echo "${looks[0]}") <(echo "${looks[1]}") | grep -c .
}
