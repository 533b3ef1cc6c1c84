# Shared by scripts/demo.sh and scripts/test.sh (sourced, not run).
#
# Installs what a fresh Debian 12 machine lacks, builds and installs gpusort,
# and runs a command inside a throwaway PostgreSQL 15 cluster (pg_virtualenv)
# that preloads gpusort.  Works as root (CI) or as a user with sudo.

set -euo pipefail

GS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# the PostgreSQL major version to build and test against; scripts set it from
# their arguments before calling the functions below
PG_MAJOR=${PG_MAJOR:-15}

# Versions gpusort supports, and where each one's packages come from: the host's
# own release (Debian 12, bookworm) has 15; the others run inside a throwaway
# root file system of the Debian suite that carries them.
GS_VERSIONS="15 17 18"
declare -A GS_SUITE=([15]=bookworm [17]=trixie [18]=sid)

# root file systems of those suites are cached here between runs
GS_CACHE=${GS_CACHE:-/var/cache/gpusort-ci}

# never more than two compile jobs (CI and the development machine have 2 cores)
GS_JOBS=$(nproc 2>/dev/null || echo 1)
if [ "$GS_JOBS" -gt 2 ]; then GS_JOBS=2; fi

# Debian packages the build, the tests and the demo need
gs_packages()
{
	echo "postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR postgresql-common
		libicu-dev build-essential pkg-config locales-all libipc-run-perl"
}
# and what building the Debian package needs on top (scripts/package-test.sh)
GS_PACKAGES_DEB="debhelper postgresql-server-dev-all fakeroot"

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
	for p in $(gs_packages) "$@"; do
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

# Build and install the extension from DIR (default: the source tree); the
# Makefile finds nvcc by itself.  A tree last built against another
# PostgreSQL version is cleaned first.
gs_build_install()
{
	local dir=${1:-$GS_ROOT} stamp version
	gs_find_pg_config || return 1
	stamp=$dir/.gs-built-for
	version=$("$PG_CONFIG" --version)
	if [ -f "$stamp" ] && [ "$(cat "$stamp")" != "$version" ]; then
		gs_log "build: the tree was built for $(cat "$stamp"): make clean"
		make -C "$dir" PG_CONFIG="$PG_CONFIG" clean >/dev/null || return 1
	fi
	gs_log "build: make -j$GS_JOBS (PG_CONFIG=$PG_CONFIG, $version)"
	make -C "$dir" -j"$GS_JOBS" PG_CONFIG="$PG_CONFIG" || return 1
	echo "$version" >"$stamp"
	gs_log "install: make install"
	gs_as_root make -C "$dir" -j"$GS_JOBS" PG_CONFIG="$PG_CONFIG" install
}

# Run "$@" inside a throwaway cluster that preloads gpusort; extra server
# settings come from the array GS_CLUSTER_OPTS (name=value).  The cluster
# lives in a temporary directory (-t) so that concurrent runs do not collide;
# as root, pg_virtualenv runs the server as the postgres user.  The locale is
# C with UTF8 encoding.
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

# ---- PostgreSQL versions the host does not carry: a chroot per suite ----

# The Debian mirror the machine's own apt configuration names (deb822
# .sources files or sources.list), so that the chroots use the same one.
gs_mirror()
{
	local uri
	uri=$(
		{
			cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '
				/^[ \t]*$/ { if (uri != "" && suites ~ /(^| )(bookworm|stable|trixie|sid)( |$)/) { print uri; exit }
					uri = ""; suites = ""; next }
				/^URIs:/ { uri = $2 }
				/^Suites:/ { $1 = ""; suites = $0 " " }
				END { if (uri != "" && suites ~ /(^| )(bookworm|stable|trixie|sid)( |$)/) print uri }'
			cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
				awk '$1 == "deb" && $0 !~ /security/ {
					for (i = 2; i <= NF; i++) if ($i !~ /^\[/) { print $i; exit } }'
		} | grep -m1 -E '^(https?|file)://.*/debian/?$' || true
	)
	echo "${uri:-http://deb.debian.org/debian}"
}

gs_suite()
{
	local s=${GS_SUITE[$1]:-}
	[ -n "$s" ] || gs_die "no Debian suite known for PostgreSQL $1 (supported: $GS_VERSIONS)"
	echo "$s"
}

# is the root file system DIR usable for PostgreSQL MAJOR?
gs_rootfs_ok()
{
	local dir=$1 major=$2
	[ -f "$dir/.gpusort-rootfs" ] &&
		[ -x "$dir/usr/lib/postgresql/$major/bin/postgres" ] &&
		[ -x "$dir/usr/lib/postgresql/$major/bin/pg_config" ] &&
		[ -x "$dir/usr/bin/pg_virtualenv" ] &&
		chroot "$dir" /usr/lib/postgresql/"$major"/bin/pg_config --version >/dev/null 2>&1
}

# refuse to delete a directory that still has something mounted below it
gs_no_mounts_below()
{
	! awk -v d="$1/" 'index($2 "/", d) == 1 { found = 1 } END { exit !found }' /proc/self/mounts
}

# Make (or reuse) the root file system for PostgreSQL MAJOR; prints its path.
# Built with mmdebstrap (debootstrap when mmdebstrap is missing) into a
# temporary directory renamed into place when complete, so an interrupted
# build is never taken for a cached one.
gs_rootfs()
{
	local major=$1 suite dir tmp mirror pkgs
	suite=$(gs_suite "$major")
	dir=$GS_CACHE/$suite
	if gs_rootfs_ok "$dir" "$major"; then
		echo "$dir"
		return 0
	fi
	gs_as_root mkdir -p "$GS_CACHE"
	if [ -e "$dir" ]; then
		gs_no_mounts_below "$dir" || gs_die "$dir is broken and still has mounts below it"
		echo "rootfs: $dir is incomplete or broken, rebuilding it" >&2
		gs_as_root rm -rf --one-file-system "$dir"
	fi
	if ! command -v mmdebstrap >/dev/null && ! command -v debootstrap >/dev/null; then
		gs_as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2 &&
			gs_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
				--no-install-recommends mmdebstrap >&2 || return 1
	fi
	mirror=$(gs_mirror)
	pkgs="$(PG_MAJOR=$major gs_packages) $GS_PACKAGES_DEB"
	pkgs=$(echo $pkgs | tr ' ' ,)
	tmp=$GS_CACHE/.$suite.new
	if [ -e "$tmp" ]; then
		gs_no_mounts_below "$tmp" || gs_die "$tmp still has mounts below it"
		gs_as_root rm -rf --one-file-system "$tmp"
	fi
	# sid's Release file is valid for a week only: a mirror that lags (or a
	# snapshot) must not fail the run, so the date check is off
	echo "rootfs: making $dir ($suite from $mirror; PostgreSQL $major)" >&2
	if command -v mmdebstrap >/dev/null; then
		gs_as_root mmdebstrap --mode=root --variant=apt --include="$pkgs" \
			--aptopt='APT::Install-Recommends "false"' \
			--aptopt='Acquire::Check-Valid-Until "false"' \
			--dpkgopt='path-exclude=/usr/share/doc/*' \
			--dpkgopt='path-exclude=/usr/share/man/*' \
			"$suite" "$tmp" "$mirror" >&2 || return 1
	else
		gs_as_root debootstrap --variant=buildd --include="$pkgs" \
			"$suite" "$tmp" "$mirror" >&2 || return 1
	fi
	gs_as_root touch "$tmp/.gpusort-rootfs"
	gs_as_root mv "$tmp" "$dir"
	gs_rootfs_ok "$dir" "$major" || { echo "rootfs: $dir is not usable" >&2; return 1; }
	echo "$dir"
}

# Run "$@" inside the root file system DIR, with /proc, /sys and /dev (with
# /dev/pts and /dev/shm) mounted for the command's lifetime: unmounted again
# whatever happens, including on failure or interrupt.  /dev is a recursive
# bind mount made a slave, so that nothing mounted or unmounted below it
# propagates back to the host's /dev.
gs_in_chroot()
{
	local dir=$1 rc=0
	shift
	# a subshell, so that its EXIT trap unmounts even on a signal
	(
		mounted=()
		cleanup()
		{
			local i
			for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
				umount -R "${mounted[i]}" 2>/dev/null ||
					umount -R -l "${mounted[i]}" 2>/dev/null || true
			done
		}
		trap cleanup EXIT
		trap 'exit 130' INT TERM HUP
		mnt()
		{
			local target=$dir$1
			shift
			mkdir -p "$target"
			mount "$@" "$target" && mounted+=("$target")
		}
		mnt /proc -t proc proc || exit 1
		mnt /sys -t sysfs sysfs || exit 1
		mnt /dev --rbind /dev || exit 1
		mount --make-rslave "$dir/dev" || exit 1
		cp -L /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
		chroot "$dir" /usr/bin/env -i HOME=/root TERM="${TERM:-dumb}" LANG=C.UTF-8 \
			PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
			GS_IN_CHROOT=1 "$@"
	) || rc=$?
	return $rc
}

# the host's Debian suite (bookworm on Debian 12)
gs_host_suite()
{
	local codename=
	if [ -r /etc/os-release ]; then
		codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	fi
	echo "${codename:-unknown}"
}

# does PostgreSQL MAJOR come from the host's own suite?
gs_runs_on_host()
{
	[ "$(gs_suite "$1")" = "$(gs_host_suite)" ]
}

# Copy the source tree (what git tracks plus untracked files it does not
# ignore; without git, everything but build outputs) to DEST.
gs_copy_tree()
{
	local dest=$1
	mkdir -p "$dest"
	if git -C "$GS_ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		git -C "$GS_ROOT" ls-files -z -co --exclude-standard |
			tar -C "$GS_ROOT" --null -T - --ignore-failed-read -cf - 2>/dev/null |
			tar -C "$dest" -xf -
	else
		tar -C "$GS_ROOT" --exclude=.git --exclude='*.o' --exclude='*.so' \
			--exclude='*.bc' --exclude=cuda/build --exclude=results \
			--exclude=.gs-built-for -cf - . | tar -C "$dest" -xf -
	fi
}

# Run "$@" with GS_OVERLAY naming a throwaway writable overlay over the root
# file system of PostgreSQL MAJOR (made first when missing): whatever the
# command installs or writes there is gone afterwards, and the cached file
# system stays as mmdebstrap left it.
gs_in_overlay()
{
	local major=$1 rootfs rc=0
	shift
	rootfs=$(gs_rootfs "$major") || return 1
	# what a killed run left: removed once nothing is mounted there
	local old
	for old in "$GS_CACHE"/.run-*; do
		[ -d "$old" ] || continue
		mountpoint -q "$old/root" && continue
		gs_no_mounts_below "$old" && rm -rf --one-file-system "$old"
	done
	(
		work=$(mktemp -d "$GS_CACHE/.run-$(gs_suite "$major").XXXXXX")
		cleanup()
		{
			if mountpoint -q "$work/root"; then
				umount -R "$work/root" 2>/dev/null || umount -R -l "$work/root" || true
			fi
			gs_no_mounts_below "$work" && rm -rf --one-file-system "$work"
		}
		trap cleanup EXIT
		trap 'exit 130' INT TERM HUP
		mkdir "$work/upper" "$work/work" "$work/root"
		mount -t overlay overlay \
			-o "lowerdir=$rootfs,upperdir=$work/upper,workdir=$work/work" \
			"$work/root" || exit 1
		GS_OVERLAY=$work/root "$@"
	) || rc=$?
	return $rc
}

# Inside gs_in_overlay: copy the source tree to /build/gpusort there, run
# "bash /build/gpusort/SCRIPT ARGS..." in the chroot, and append the PASS/FAIL
# lines it left in /build/results to the file RESULTS.
gs_run_tree_in_chroot()
{
	local major=$1 results=$2 rc=0
	shift 2
	gs_copy_tree "$GS_OVERLAY/build/gpusort" || return 1
	: >"$GS_OVERLAY/build/results"
	gs_in_chroot "$GS_OVERLAY" bash "/build/gpusort/$1" "${@:2}" || rc=$?
	cat "$GS_OVERLAY/build/results" >>"$results"
	return $rc
}
