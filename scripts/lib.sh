# Shared by scripts/demo.sh and scripts/test.sh (sourced, not run).
#
# Installs what a fresh Debian 12 machine lacks, builds and installs gpusort,
# and runs a command inside a throwaway PostgreSQL 15 cluster (pg_virtualenv)
# that preloads gpusort.  Works as root (CI) or as a user with sudo.

set -euo pipefail

GS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PG_MAJOR=15

# never more than two compile jobs (CI and the development machine have 2 cores)
GS_JOBS=$(nproc 2>/dev/null || echo 1)
if [ "$GS_JOBS" -gt 2 ]; then GS_JOBS=2; fi

# Debian packages the build, the tests and the demo need
GS_PACKAGES="postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR postgresql-contrib
	postgresql-common libicu-dev build-essential pkg-config locales-all"

gs_log()
{
	printf '\n==> %s\n' "$*"
}

gs_die()
{
	printf 'error: %s\n' "$*" >&2
	exit 1
}

# run a command as root: directly when we are root, else through sudo
gs_as_root()
{
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		gs_die "need root for: $* (run as root or install sudo)"
	fi
}

# install the Debian packages that are missing; apt-get update only if needed
gs_install_packages()
{
	local missing=() p
	for p in $GS_PACKAGES; do
		if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
			missing+=("$p")
		fi
	done
	if [ "${#missing[@]}" -eq 0 ]; then
		gs_log "packages: all present"
		return
	fi
	gs_log "packages: installing ${missing[*]}"
	command -v apt-get >/dev/null || gs_die "apt-get not found: install ${missing[*]} by hand"
	gs_as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q &&
		gs_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
			--no-install-recommends "${missing[@]}"
}

# pg_config of PostgreSQL 15: $PG_CONFIG if set, else Debian's, else PATH's
gs_find_pg_config()
{
	if [ -z "${PG_CONFIG:-}" ]; then
		if [ -x /usr/lib/postgresql/$PG_MAJOR/bin/pg_config ]; then
			PG_CONFIG=/usr/lib/postgresql/$PG_MAJOR/bin/pg_config
		else
			PG_CONFIG=$(command -v pg_config) || gs_die "pg_config not found"
		fi
	fi
	case "$("$PG_CONFIG" --version)" in
		"PostgreSQL $PG_MAJOR".*) ;;
		*) gs_die "$PG_CONFIG is not PostgreSQL $PG_MAJOR: $("$PG_CONFIG" --version)" ;;
	esac
	export PG_CONFIG
	PG_BINDIR=$("$PG_CONFIG" --bindir)
}

# build and install the extension (the Makefile finds nvcc by itself)
gs_build_install()
{
	gs_find_pg_config || return 1
	gs_log "build: make -j$GS_JOBS (PG_CONFIG=$PG_CONFIG)"
	make -C "$GS_ROOT" -j"$GS_JOBS" PG_CONFIG="$PG_CONFIG" || return 1
	gs_log "install: make install"
	gs_as_root make -C "$GS_ROOT" -j"$GS_JOBS" PG_CONFIG="$PG_CONFIG" install
}

# Run "$@" inside a throwaway cluster that preloads gpusort; extra server
# settings come from the array GS_CLUSTER_OPTS (name=value).  The cluster
# lives in a temporary directory (-t) so that concurrent runs do not collide;
# as root, pg_virtualenv runs the server as the postgres user.  The locale is
# C with UTF8 encoding, as on the GPU machine (see gpu-machine/pg-up.sh).
gs_in_cluster()
{
	local opts=(-o shared_preload_libraries=gpusort -o fsync=off
				-o synchronous_commit=off -o full_page_writes=off)
	local o
	for o in "${GS_CLUSTER_OPTS[@]}"; do
		opts+=(-o "$o")
	done
	command -v pg_virtualenv >/dev/null || gs_die "pg_virtualenv not found (package postgresql-common)"
	pg_virtualenv -t -v "$PG_MAJOR" -i '--no-locale -E UTF8' "${opts[@]}" "$@"
}
GS_CLUSTER_OPTS=()
