#!/usr/bin/env bash
# Run every gpusort test on this machine.
#
#   scripts/test.sh
#
# Installs the Debian packages that are missing, builds and installs the
# extension, then, inside a throwaway PostgreSQL 15 cluster that preloads
# gpusort: the C unit tests (make -C test/<dir> check, e.g. test/engine) and
# the pg_regress suite (make installcheck; sql/*.sql against expected/*.out).
# No GPU is needed: without one gpusort uses its CPU engine.
#
# The last line printed is "N passed, M failed", counting each pg_regress test
# and each unit-test directory (a build failure counts as one failure).  The
# exit status is 0 only when nothing failed.

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# ---- inside the cluster: pg_regress; appends "PASS name"/"FAIL name" ----
if [ "${1:-}" = --in-cluster ]; then
	set +e
	results=$2
	gs_find_pg_config
	gs_log "pg_regress: make installcheck (server $PGHOST:$PGPORT)"
	rm -f "$GS_ROOT/regression.diffs" "$GS_ROOT/regression.out"
	make -C "$GS_ROOT" PG_CONFIG="$PG_CONFIG" installcheck 2>&1 |
		tee "$results.regress"
	rc=${PIPESTATUS[0]}
	# "test name ... ok 12 ms" / "     name ... FAILED" (parallel groups)
	sed -nE 's/^(test +| +)([^ ]+) +\.\.\. (ok|FAILED|failed \(ignored\)).*/\3 \2/p' \
		"$results.regress" |
		while read -r status name; do
			case "$status" in
				FAILED) echo "FAIL regress/$name" ;;
				*) echo "PASS regress/$name" ;;
			esac
		done >>"$results"
	if [ "$rc" -ne 0 ]; then
		grep -q '^FAIL regress/' "$results" || echo "FAIL regress (pg_regress exited $rc)" >>"$results"
		if [ -s "$GS_ROOT/regression.diffs" ]; then
			gs_log "regression.diffs (first 2000 lines; full file: $GS_ROOT/regression.diffs)"
			head -n 2000 "$GS_ROOT/regression.diffs"
		fi
	fi
	exit 0
fi

# ---- outside: packages, build, cluster ----
start=$(date +%s)
results=$(mktemp "${TMPDIR:-/tmp}/gpusort-test.XXXXXX")
trap 'rm -f "$results" "$results.regress"' EXIT

summary()
{
	local passed failed
	passed=$(grep -c '^PASS ' "$results" || true)
	failed=$(grep -c '^FAIL ' "$results" || true)
	if [ "$failed" -gt 0 ]; then
		gs_log "failed:"
		grep '^FAIL ' "$results" | sed 's/^FAIL /  /'
	fi
	echo "elapsed: $(($(date +%s) - start)) s"
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
}

if ! gs_install_packages; then
	echo "FAIL packages (apt-get)" >>"$results"
	summary
	exit 1
fi
if ! gs_build_install; then
	echo "FAIL build" >>"$results"
	summary
	exit 1
fi

# unit tests: each test/<dir> with a Makefile, "make check" (output indented so
# that only this script's last line starts with a count)
for mk in "$GS_ROOT"/test/*/Makefile; do
	[ -f "$mk" ] || continue
	dir=$(dirname "$mk")
	name=test/$(basename "$dir")
	gs_log "unit tests: make -C $name check"
	if make -C "$dir" -j"$GS_JOBS" PG_CONFIG="$PG_CONFIG" check 2>&1 | sed 's/^/    /'; then
		echo "PASS $name" >>"$results"
	else
		echo "FAIL $name" >>"$results"
	fi
done
[ -d "$GS_ROOT/test/engine" ] ||
	echo "note: test/engine does not exist yet; CPU engine unit test skipped"

# the pg_regress suite, in a throwaway cluster
if ! gs_in_cluster bash "$GS_ROOT/scripts/test.sh" --in-cluster "$results"; then
	echo "FAIL cluster (pg_virtualenv failed)" >>"$results"
fi
summary
