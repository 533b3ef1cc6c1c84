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
