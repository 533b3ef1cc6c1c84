#!/bin/sh
# cuda/bench/variants.sh: time bench_engine builds of policy variants
# (cuda/build/bench_*) on a few telling configurations.
for b in cuda/build/bench_engine cuda/build/bench_*; do
	[ -x "$b" ] || continue
	case "$b" in *bench_engine) [ "$b" = cuda/build/bench_engine ] || continue ;; esac
	for cfg in ${GS_VARIANT_CFGS:-1e7:uniform:u64 1e8:uniform:u64 4e8:uniform:u64 4e8:zipf:u64 4e8:uniform:u32 4e8:uniform:16B}; do
		printf '%-28s ' "$(basename $b)"
		"$b" --only "$cfg" --reps 5 | grep '^| [0-9]' | cut -d'|' -f2-10
	done
done
