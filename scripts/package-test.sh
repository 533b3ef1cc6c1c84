#!/usr/bin/env bash
# Build the Debian package postgresql-N-gpusort and test the installed package.
#
#   scripts/package-test.sh [VERSION [OUTDIR]]     (VERSION: 15, 17 or 18; default 15)
#
# Everything happens in a throwaway overlay over the root file system of
# VERSION's Debian suite (bookworm for 15, trixie for 17, sid for 18; the same
# cache as scripts/test.sh, made when missing), where gpusort was never
# installed:
#   1. the source tree is copied to /build/gpusort; "pg_buildext updatecontrol"
#      writes debian/control for the suite's PostgreSQL version, and
#      "dpkg-buildpackage -us -uc -b" builds the package (pg_buildext, as
#      Debian builds its PostgreSQL extensions; CPU-only, as the suite has no
#      nvcc);
#   2. the package is installed with dpkg, and its files are checked;
#   3. debian/tests/installcheck runs, as autopkgtest would: "pg_buildext
#      installcheck", the whole pg_regress suite against the installed files,
#      in a throwaway cluster that preloads gpusort.
# The .deb files are copied to OUTDIR when one is given.  With GS_CUDA_HOME
# naming a CUDA toolkit on the host (e.g. /usr/local/cuda), it is mounted
# read-only at /usr/local/cuda in the chroot, so that the package carries the
# CUDA engine too (checked).  Exits 0 when all of it worked.  Needs root (or sudo) for mmdebstrap, mount and chroot.

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# ---- inside the chroot ----
if [ "${1:-}" = --in-chroot ]; then
	major=$2
	cd /build/gpusort
	pkg=postgresql-$major-gpusort
	libdir=/usr/lib/postgresql/$major/lib
	extdir=/usr/share/postgresql/$major/extension

	[ ! -e "$libdir/gpusort.so" ] ||
		gs_die "$libdir/gpusort.so exists before the package is installed: not a clean system"

	gs_log "package: pg_buildext updatecontrol (supported here: $(pg_buildext supported-versions | xargs))"
	pg_buildext updatecontrol
	grep -q "^Package: $pkg\$" debian/control ||
		gs_die "debian/control names no $pkg: is PostgreSQL $major in debian/pgversions?"

	gs_log "package: dpkg-buildpackage -us -uc -b (-j$GS_JOBS)"
	pstart=$(date +%s)
	DEB_BUILD_OPTIONS="parallel=$GS_JOBS" dpkg-buildpackage -us -uc -b
	echo "package built in $(($(date +%s) - pstart)) s"
	deb=$(ls ../"$pkg"_*.deb)
	dpkg-deb --info "$deb" | sed -n '/Package:/,$p'
	dpkg-deb --contents "$deb"

	gs_log "package: dpkg -i $deb"
	dpkg -i "$deb"
	# the package's version is the extension's (debian/rules checks it too)
	version=$(dpkg-deb -f "$deb" Version)
	extversion=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$extdir/gpusort.control")
	[ "${version%-*}" = "$extversion" ] ||
		gs_die "package version $version, extension version $extversion"
	files=("$libdir/gpusort.so" "$extdir/gpusort.control" "$extdir/gpusort--0.1.sql"
		"$extdir/gpusort--$extversion.sql")
	if [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null; then
		files+=("$libdir/libgpusort_cuda.so")
	fi
	for f in "${files[@]}"; do
		[ -f "$f" ] || gs_die "the package did not install $f"
		dpkg -S "$f" | grep -q "^$pkg:" || gs_die "$f does not belong to $pkg"
	done

	gs_log "package: debian/tests/installcheck (pg_buildext installcheck)"
	# a build tree left from dpkg-buildpackage must not be what is tested
	rm -rf build-* ./*.so src/*/*.o src/*/*.bc
	debian/tests/installcheck
	exit 0
fi

# ---- outside ----
major=${1:-15}
outdir=${2:-}
case " $GS_VERSIONS " in
	*" $major "*) ;;
	*) gs_die "usage: scripts/package-test.sh [VERSION [OUTDIR]]  (versions: $GS_VERSIONS)" ;;
esac
if [ -n "$outdir" ]; then
	mkdir -p "$outdir"
	outdir=$(cd "$outdir" && pwd)
fi

# copy the .deb files out of the overlay before it goes
package_in_overlay()
{
	local rc=0
	gs_copy_tree "$GS_OVERLAY/build/gpusort" || return 1
	if [ -n "${GS_CUDA_HOME:-}" ]; then
		[ -x "$GS_CUDA_HOME/bin/nvcc" ] || gs_die "GS_CUDA_HOME=$GS_CUDA_HOME has no bin/nvcc"
		mkdir -p "$GS_OVERLAY/usr/local/cuda"
		# unmounted with the overlay (umount -R)
		mount --bind "$GS_CUDA_HOME" "$GS_OVERLAY/usr/local/cuda" &&
			mount -o remount,bind,ro "$GS_OVERLAY/usr/local/cuda" || return 1
	fi
	gs_in_chroot "$GS_OVERLAY" bash /build/gpusort/scripts/package-test.sh --in-chroot "$major" || rc=$?
	if [ -n "$outdir" ]; then
		cp "$GS_OVERLAY"/build/*.deb "$outdir"/ 2>/dev/null &&
			echo "package files copied to $outdir"
	fi
	return $rc
}

gs_log "package test for PostgreSQL $major in a $(gs_suite "$major") root file system"
gs_in_overlay "$major" package_in_overlay
