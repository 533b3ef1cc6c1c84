#!/usr/bin/env bash
# Run gpusort's tests.
#
#   scripts/test.sh                 the host's PostgreSQL only (15 on Debian 12)
#   scripts/test.sh all             every supported version (15, 17, 18) and
#                                   the Debian package of each (what CI runs)
#   scripts/test.sh 15 [17] [18]    the versions named, with their packages
#
# For each version: build and install the extension, then, inside a throwaway
# cluster that preloads gpusort, run the C unit tests (make -C test/<dir>
# check) and the pg_regress suite (make installcheck; sql/*.sql against
# expected/*.out), with versions named (or "all") a second time with every
# sort sent through the gpusort service's fake device (make
# installcheck-service; GS_SERVICE_PASS=yes or no decides it either way),
# and last the TAP tests (test/t/*.pl, run with prove on PostgreSQL's own
# test framework, PostgreSQL::Test::Cluster), the tests that need more
# than one session, a crash and restart, cancels under load or servers of
# their own: each starts its own servers (one, or a coordinator and two
# postgres_fdw shards) on 127.0.0.1 ports of their own.
# With versions named (or "all"), then build the Debian package and run the
# regression suite against the installed package (scripts/package-test.sh),
# for the versions in GS_PACKAGE_VERSIONS (default: each version tested;
# "none" for none).  Without an argument no package is built, unless
# GS_PACKAGE_VERSIONS names the host's version.
#
# A version whose Debian suite is the host's own (15 on Debian 12, bookworm)
# runs on the host: the missing Debian packages are installed with apt-get.
# The others (17: trixie, 18: sid) run inside a root file system of their
# suite, made with mmdebstrap and kept in $GS_CACHE (default
# /var/cache/gpusort-ci) for the next run; each run works in a throwaway
# overlay over it, so the cached file system stays clean.  Needs root (or
# sudo) for apt-get, mmdebstrap, mount and chroot.  No GPU is needed:
# without one gpusort uses its CPU engine.
#
# The last line printed is "N passed, M failed", counting each pg_regress
# test, each unit-test directory and each TAP test file
# once per version ("pg17/regress/keys_int", "pg17/tap/001_shards"), plus each
# package test; a build failure counts as one failure.  The exit
# status is 0 only when nothing failed.

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Run one TAP test (test/t/NAME.pl) with prove, in a throwaway directory that
# holds a copy of test/t (the build tree may be unreadable to the test's
# user) and the test's servers and logs (tmp_check).  As root the test runs
# as the postgres user, since initdb refuses root.  A test that hangs is
# killed after 5 minutes; on failure the tails of its logs are printed.
gs_tap_test()
{
	local test=$1 dir perl_lib rc=0 log
	local -a as_user=()
	perl_lib=$("$PG_CONFIG" --pkglibdir)/pgxs/src/test
	dir=$(mktemp -d "${TMPDIR:-/tmp}/gpusort-tap.XXXXXX")
	cp -r "$(dirname "$test")" "$dir/t"
	if [ "$(id -u)" -eq 0 ]; then
		chown -R postgres: "$dir"
		as_user=(runuser -u postgres --)
	fi
	(
		cd "$dir" &&
			"${as_user[@]}" env -i HOME="$dir" LANG=C.UTF-8 \
				PATH="$PG_BINDIR:/usr/local/bin:/usr/bin:/bin" \
				PERL5LIB="$perl_lib/perl" PG_REGRESS="$perl_lib/regress/pg_regress" \
				TESTDIR="$dir" TESTDATADIR="$dir/tmp_check" TESTLOGDIR="$dir/tmp_check/log" \
				timeout -k 10 300 prove -v "t/$(basename "$test")"
	) || rc=$?
	if [ "$rc" -ne 0 ]; then
		for log in "$dir"/tmp_check/log/*; do
			[ -f "$log" ] || continue
			echo "--- $(basename "$log") (last 40 lines)"
			tail -n 40 "$log"
		done
	fi
	# servers that a killed test left running
	find "$dir" -name postmaster.pid -printf '%h\n' | while read -r data; do
		"${as_user[@]}" "$PG_BINDIR/pg_ctl" -D "$data" stop -m immediate >/dev/null 2>&1
	done
	rm -rf "$dir"
	return "$rc"
}

# ---- inside the cluster: pg_regress; appends "PASS pgN/..."/"FAIL pgN/..." ----
if [ "${1:-}" = --in-cluster ]; then
	set +e
	results=$2
	prefix=$3
	builddir=$4
	gs_find_pg_config
	# the suite as it is, then (GS_SERVICE_PASS) with every sort sent
	# through the gpusort service ("fake" device: the service sorts with
	# its CPU engine)
	passes=regress:installcheck
	[ "${GS_SERVICE_PASS:-yes}" = no ] || passes+=" service:installcheck-service"
	for pass in $passes; do
		kind=${pass%%:*}
		target=${pass#*:}
		gs_log "$prefix: pg_regress: make $target (server $PGHOST:$PGPORT)"
		rm -f "$builddir/regression.diffs" "$builddir/regression.out"
		make -C "$builddir" PG_CONFIG="$PG_CONFIG" "$target" 2>&1 |
			tee "$results.regress"
		rc=${PIPESTATUS[0]}
		# 15: "test name ... ok 12 ms" / "     name ... FAILED" (parallel groups);
		# 16 and later: "ok 1         - name   12 ms" / "not ok 2     - name"
		sed -nE \
			-e 's/^(test +| +)([^ ]+) +\.\.\. (ok|FAILED|failed \(ignored\)).*/\3 \2/p' \
			-e 's/^(ok|not ok) +[0-9]+ +(\+ +)?- +([^ ]+).*/\1 \3/p' \
			"$results.regress" |
			while read -r status name; do
				case "$status" in
					FAILED|not) name=${name#ok }; echo "FAIL $prefix/$kind/$name" ;;
					*) echo "PASS $prefix/$kind/$name" ;;
				esac
			done >>"$results"
		if [ "$rc" -ne 0 ]; then
			grep -q "^FAIL $prefix/$kind/" "$results" ||
				echo "FAIL $prefix/$kind (pg_regress exited $rc)" >>"$results"
			if [ -s "$builddir/regression.diffs" ]; then
				gs_log "regression.diffs (first 2000 lines; full file: $builddir/regression.diffs)"
				head -n 2000 "$builddir/regression.diffs"
			fi
			# keep the first pass's diffs for whoever looks after the run
			cp -f "$builddir/regression.diffs" "$builddir/regression.$kind.diffs" 2>/dev/null
		fi
	done
	exit 0
fi

# ---- one version on this system (the host, or inside a chroot) ----
#   scripts/test.sh --local N RESULTS BUILDDIR
if [ "${1:-}" = --local ]; then
	export PG_MAJOR=$2
	results=$3
	builddir=$4
	prefix=pg$PG_MAJOR
	set +e
	if ! (gs_install_packages); then
		echo "FAIL $prefix/packages (apt-get)" >>"$results"
		exit 0
	fi
	if ! (gs_build_install "$builddir"); then
		echo "FAIL $prefix/build" >>"$results"
		exit 0
	fi
	gs_find_pg_config
	# unit tests: each test/<dir> with a Makefile, "make check" (output
	# indented so that only the outer script's last line starts with a count)
	for mk in "$builddir"/test/*/Makefile; do
		[ -f "$mk" ] || continue
		dir=$(dirname "$mk")
		name=test/$(basename "$dir")
		gs_log "$prefix: unit tests: make -C $name check"
		if make -C "$dir" -j"$GS_JOBS" PG_CONFIG="$PG_CONFIG" check 2>&1 | sed 's/^/    /'; then
			echo "PASS $prefix/$name" >>"$results"
		else
			echo "FAIL $prefix/$name" >>"$results"
		fi
	done
	# the pg_regress suite, in a throwaway cluster
	if ! gs_in_cluster bash "$builddir/scripts/test.sh" --in-cluster "$results" "$prefix" "$builddir"; then
		echo "FAIL $prefix/cluster (pg_virtualenv failed)" >>"$results"
	fi
	# the TAP tests: each test/t/*.pl starts its own servers with
	# PostgreSQL's test framework (PostgreSQL::Test::Cluster); "PASS pgN/tap/name"
	for t in "$builddir"/test/t/*.pl; do
		[ -f "$t" ] || continue
		name=$(basename "$t" .pl)
		gs_log "$prefix: TAP test $name"
		gs_tap_test "$t" 2>&1 | sed 's/^/    /'
		if [ "${PIPESTATUS[0]}" -eq 0 ]; then
			echo "PASS $prefix/tap/$name" >>"$results"
		else
			echo "FAIL $prefix/tap/$name" >>"$results"
		fi
	done
	exit 0
fi

# ---- outside: each version, then the summary ----
usage="usage: scripts/test.sh [all | VERSION...]  (versions: $GS_VERSIONS; default: the host's)"
versions=()
for a in "$@"; do
	case " all $GS_VERSIONS " in
		*" $a "*) ;;
		*) gs_die "$usage" ;;
	esac
	if [ "$a" = all ]; then
		versions+=($GS_VERSIONS)
	else
		versions+=("$a")
	fi
done
if [ "${#versions[@]}" -gt 0 ]; then
	package_versions=${GS_PACKAGE_VERSIONS:-${versions[*]}}
else
	# no argument: the version the host's own Debian release carries, no package
	for v in $GS_VERSIONS; do
		if gs_runs_on_host "$v"; then
			versions=("$v")
			break
		fi
	done
	[ "${#versions[@]}" -gt 0 ] ||
		gs_die "no PostgreSQL version of $GS_VERSIONS comes from this host's release ($(gs_host_suite)); name one: $usage"
	package_versions=${GS_PACKAGE_VERSIONS:-none}
	# and the suite once: the service's pass is CI's ("all")
	export GS_SERVICE_PASS=${GS_SERVICE_PASS:-no}
fi

start=$(date +%s)
results=$(mktemp "${TMPDIR:-/tmp}/gpusort-test.XXXXXX")
timings=$(mktemp "${TMPDIR:-/tmp}/gpusort-times.XXXXXX")
trap 'rm -f "$results" "$results.regress" "$timings"' EXIT

for v in "${versions[@]}"; do
	vstart=$(date +%s)
	if gs_runs_on_host "$v"; then
		gs_log "PostgreSQL $v: on this machine ($(gs_host_suite))"
		bash "$GS_ROOT/scripts/test.sh" --local "$v" "$results" "$GS_ROOT" ||
			echo "FAIL pg$v/local (exited $?)" >>"$results"
	else
		gs_log "PostgreSQL $v: in a $(gs_suite "$v") root file system"
		# the chroot writes its results into its own file system
		if ! gs_in_overlay "$v" gs_run_tree_in_chroot "$v" "$results" \
				scripts/test.sh --local "$v" /build/results /build/gpusort; then
			grep -q "^[A-Z]* pg$v/" "$results" ||
				echo "FAIL pg$v/chroot (could not make or enter the root file system)" >>"$results"
		fi
	fi
	case " $package_versions " in
		*" $v "*)
			gs_log "PostgreSQL $v: Debian package (scripts/package-test.sh $v)"
			if bash "$GS_ROOT/scripts/package-test.sh" "$v"; then
				echo "PASS pg$v/package" >>"$results"
			else
				echo "FAIL pg$v/package" >>"$results"
			fi
			;;
	esac
	echo "pg$v: $(($(date +%s) - vstart)) s" >>"$timings"
done

passed=$(grep -c '^PASS ' "$results" || true)
failed=$(grep -c '^FAIL ' "$results" || true)
gs_log "summary"
for v in "${versions[@]}"; do
	echo "  pg$v: $(grep -c "^PASS pg$v/" "$results" || true) passed," \
		"$(grep -c "^FAIL pg$v/" "$results" || true) failed" \
		"($(sed -n "s/^pg$v: //p" "$timings"))"
done
if [ "$failed" -gt 0 ]; then
	echo "failed:"
	grep '^FAIL ' "$results" | sed 's/^FAIL /  /'
fi
echo "elapsed: $(($(date +%s) - start)) s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
