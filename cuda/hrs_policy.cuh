/*-------------------------------------------------------------------------
 *
 * hrs_policy.cuh
 *	  Tuning policies of the hybrid radix sort, one struct per
 *	  architecture, specialised per key width.  Every tuning constant of
 *	  the engine lives here and nowhere else.
 *
 * Partition: the counting-sort passes (histogram, scatter) process key
 * blocks of THREADS * ITEMS keys, staged through shared memory.
 * Local0..Local(NUM_LOCAL-1): the shared-memory sorts for small buckets ("local sort
 * configurations" of Stehle & Jacobsen); a bucket goes to the smallest
 * configuration whose tile holds it, and buckets larger than the last tile
 * are partitioned again.  A local sort first sorts only the top PROBE_BITS
 * of the bits that vary in its task.  MERGE_LIMIT: neighbouring small buckets of one
 * parent are batched into one local-sort task while their total stays at
 * or under this many keys.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef HRS_POLICY_CUH
#define HRS_POLICY_CUH

namespace hrs
{

template <int THREADS_, int ITEMS_>
struct PartitionPolicy
{
	static constexpr int THREADS = THREADS_;
	static constexpr int ITEMS = ITEMS_;
	static constexpr int TILE = THREADS_ * ITEMS_;
};

/* how a local sort ranks keys in a block pass (see hrs_agent_local.cuh) */
enum LocalRank
{
	RANK_COUNTERS,				/* CUB BlockRadixSort: per-thread counters */
	RANK_MATCH					/* CUB BlockRadixRankMatch: warp match */
};

template <int THREADS_, int ITEMS_, int RADIX_BITS_, int PROBE_BITS_,
		  LocalRank RANK_ = RANK_COUNTERS, int MIN_BLOCKS_ = 1>
struct LocalPolicy
{
	static constexpr int MIN_BLOCKS = MIN_BLOCKS_;	/* per SM, for registers */
	static constexpr int THREADS = THREADS_;
	static constexpr int ITEMS = ITEMS_;
	static constexpr int TILE = THREADS_ * ITEMS_;
	static constexpr int RADIX_BITS = RADIX_BITS_;	/* bits per block pass */
	static constexpr int PROBE_BITS = PROBE_BITS_;	/* see LocalSortAgent */
	static constexpr LocalRank RANK = RANK_;
};

/* settings shared by every key width */
struct CommonPolicy
{
	static constexpr int INIT_THREADS = 256;
	/*
	 * A pass of at most this many key blocks per SM plans its buckets in
	 * the histogram kernel instead of a kernel of its own (a launch saved,
	 * against a fence per histogram block).
	 */
	static constexpr int FUSED_PLAN_BLOCKS_PER_SM = 2;
	static constexpr int IOTA_THREADS = 256;
	/* longest run of keys equal on a local sort's probe fixed in place */
	static constexpr int LOCAL_RUN_MAX = 16;
	/*
	 * Sorts of more rows than this first read back which digits vary
	 * anywhere (one host round trip); smaller ones start partitioning at
	 * once and let the plan skip constant digits.
	 */
	static constexpr unsigned PRESCAN_ROWS = 1u << 21;
	/*
	 * A wait for the device polls without sleeping for its first
	 * POLL_SPIN_US (a sleep overshoots by the kernel's timer slack, about
	 * 50 us, which small sorts paid at every host round trip), then sleeps
	 * from POLL_MIN_US, doubling, up to POLL_MAX_US between polls (the
	 * device idles from the end of a wait's kernels until the host wakes,
	 * so the longest sleep is kept short).
	 */
	static constexpr int POLL_SPIN_US = 300;
	static constexpr int POLL_MIN_US = 20;
	static constexpr int POLL_MAX_US = 100;
};

/*
 * Hopper (sm_90): H100, H200.  Local sorts: 8-bit block passes ranked by
 * warp match (RANK_MATCH; its shared memory does not grow with the thread
 * count, so 8 bits cost what 6 did with per-thread counters) over a 24-bit
 * probe, i.e. three passes where 6-bit passes over a 30-bit probe took
 * five.  Sm90Local's MIN_THREADS asks the compiler to fit that many
 * threads per SM in registers: 1024 for 4- and 8-byte keys (64 registers;
 * the sorts are latency-bound, and without it a 512-thread block took all
 * registers of an SM); 768 for the wide keys, which spill at 64.
 * Measured on an H100 (bench/results/engine-h100-*.md): a 16-bit probe
 * is faster on uniform keys but falls back to full re-sorts on
 * entropy-reduced ones; a 32-bit probe costs a fourth pass.
 */
template <int THREADS, int ITEMS, int MIN_THREADS>
using Sm90Local = LocalPolicy<THREADS, ITEMS, 8, 24, RANK_MATCH,
							  (MIN_THREADS / THREADS > 1 ? MIN_THREADS / THREADS : 1)>;

template <int KB>
struct Sm90Policy;

/*
 * 4- and 8-byte keys: eight tiles about 1.2-1.4x apart, so that a bucket
 * is padded by little whatever its size (a local sort costs what its tile
 * holds, not what its keys fill), and batches stop at a tile's size.  The
 * two widths share these local sorts and differ in their partition.
 */
struct Sm90NarrowLocals
{
	static constexpr int NUM_LOCAL = 8;
	typedef Sm90Local<128, 8, 1024> Local0;
	typedef Sm90Local<256, 7, 1024> Local1;
	typedef Sm90Local<256, 10, 1024> Local2;
	typedef Sm90Local<256, 14, 1024> Local3;
	typedef Sm90Local<512, 9, 1024> Local4;
	typedef Sm90Local<512, 11, 1024> Local5;
	typedef Sm90Local<512, 13, 1024> Local6;
	typedef Sm90Local<512, 16, 1024> Local7;
	static constexpr unsigned MERGE_LIMIT = 1792;
};

template <>
struct Sm90Policy<4> : Sm90NarrowLocals
{
	typedef PartitionPolicy<512, 16> Partition;
};

template <>
struct Sm90Policy<8> : Sm90NarrowLocals
{
	typedef PartitionPolicy<384, 12> Partition;
};

template <>
struct Sm90Policy<16>
{
	typedef PartitionPolicy<256, 9> Partition;
	static constexpr int NUM_LOCAL = 6;
	typedef Sm90Local<128, 4, 768> Local0;
	typedef Sm90Local<128, 8, 768> Local1;
	typedef Sm90Local<256, 6, 768> Local2;
	typedef Sm90Local<256, 8, 768> Local3;
	typedef Sm90Local<256, 12, 768> Local4;
	typedef Sm90Local<512, 8, 768> Local5;
	static constexpr unsigned MERGE_LIMIT = 1024;
};

/* 24- and 32-byte keys: these local sorts, each its own partition */
struct Sm90WideLocals
{
	static constexpr int NUM_LOCAL = 6;
	typedef Sm90Local<64, 4, 768> Local0;
	typedef Sm90Local<128, 4, 768> Local1;
	typedef Sm90Local<128, 6, 768> Local2;
	typedef Sm90Local<256, 4, 768> Local3;
	typedef Sm90Local<256, 6, 768> Local4;
	typedef Sm90Local<256, 8, 768> Local5;
	static constexpr unsigned MERGE_LIMIT = 512;
};

template <>
struct Sm90Policy<24> : Sm90WideLocals
{
	typedef PartitionPolicy<256, 6> Partition;
};

template <>
struct Sm90Policy<32> : Sm90WideLocals
{
	typedef PartitionPolicy<256, 4> Partition;
};

/* local configuration c of an architecture's policy, as a type */
template <typename A, int C>
struct LocalAt;
template <typename A>
struct LocalAt<A, 0> { typedef typename A::Local0 type; };
template <typename A>
struct LocalAt<A, 1> { typedef typename A::Local1 type; };
template <typename A>
struct LocalAt<A, 2> { typedef typename A::Local2 type; };
template <typename A>
struct LocalAt<A, 3> { typedef typename A::Local3 type; };
template <typename A>
struct LocalAt<A, 4> { typedef typename A::Local4 type; };
template <typename A>
struct LocalAt<A, 5> { typedef typename A::Local5 type; };
template <typename A>
struct LocalAt<A, 6> { typedef typename A::Local6 type; };
template <typename A>
struct LocalAt<A, 7> { typedef typename A::Local7 type; };

/* the policy the engine builds with (one device architecture: sm_90) */
template <int KB>
struct Policy : Sm90Policy<KB>, CommonPolicy
{
	typedef Sm90Policy<KB> A;
	static constexpr unsigned LOCAL_LIMIT = LocalAt<A, A::NUM_LOCAL - 1>::type::TILE;

	/* tile of local configuration c (configurations C and up) */
	template <int C = 0>
	__host__ __device__ static constexpr unsigned local_tile(int c)
	{
		if constexpr (C + 1 >= A::NUM_LOCAL)
			return LocalAt<A, C>::type::TILE;
		else
			return c == C ? LocalAt<A, C>::type::TILE : local_tile<C + 1>(c);
	}

	/*
	 * The last configuration of the launch group that starts at C:
	 * neighbouring configurations with the same block shape (threads,
	 * blocks per SM) are sorted by one launch.
	 */
	template <int C>
	static constexpr int group_last()
	{
		if constexpr (C + 1 >= A::NUM_LOCAL)
			return C;
		else if constexpr (LocalAt<A, C + 1>::type::THREADS != LocalAt<A, C>::type::THREADS ||
						   LocalAt<A, C + 1>::type::MIN_BLOCKS != LocalAt<A, C>::type::MIN_BLOCKS)
			return C;
		else
			return group_last<C + 1>();
	}

	/* the smallest configuration whose tile holds n keys */
	template <int C = 0>
	__host__ __device__ static constexpr int local_config(size_t n)
	{
		if constexpr (C + 1 >= A::NUM_LOCAL)
			return C;
		else
			return n <= LocalAt<A, C>::type::TILE ? C : local_config<C + 1>(n);
	}
};

}								/* namespace hrs */

#endif							/* HRS_POLICY_CUH */
