/*-------------------------------------------------------------------------
 *
 * hrs_policy.cuh
 *	  Tuning policies of the hybrid radix sort, one struct per
 *	  architecture, specialised per key width.  Every tuning constant of
 *	  the engine lives here and nowhere else.
 *
 * Partition: the counting-sort passes (histogram, scatter) process key
 * blocks of THREADS * ITEMS keys, staged through shared memory.
 * Local0..2: the shared-memory sorts for small buckets ("local sort
 * configurations" of Stehle & Jacobsen); a bucket goes to the smallest
 * configuration whose tile holds it, and buckets larger than Local2's tile
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

template <int THREADS_, int ITEMS_, int RADIX_BITS_, int PROBE_BITS_>
struct LocalPolicy
{
	static constexpr int THREADS = THREADS_;
	static constexpr int ITEMS = ITEMS_;
	static constexpr int TILE = THREADS_ * ITEMS_;
	static constexpr int RADIX_BITS = RADIX_BITS_;	/* bits per block pass */
	static constexpr int PROBE_BITS = PROBE_BITS_;	/* see LocalSortAgent */
};

/* settings shared by every key width */
struct CommonPolicy
{
	static constexpr int PLAN_THREADS = 256;	/* one per digit value */
	static constexpr int PREPASS_THREADS = 256;
	static constexpr int PREPASS_ITEMS = 8;	/* keys per thread */
	static constexpr int COPY_ITEMS = 4;	/* per partition thread */
	/* sorts at or under this many rows skip the per-pass host sync */
	static constexpr unsigned SYNC_FREE_ROWS = 1u << 21;
	/* first wait between polls of a running sort, and the longest */
	static constexpr int POLL_MIN_US = 20;
	static constexpr int POLL_MAX_US = 1000;
};

/* Hopper (sm_90): H100, H200 */
template <int KB>
struct Sm90Policy;

template <>
struct Sm90Policy<4>
{
	typedef PartitionPolicy<512, 16> Partition;
	typedef LocalPolicy<128, 8, 6, 36> Local0;
	typedef LocalPolicy<256, 16, 6, 36> Local1;
	typedef LocalPolicy<512, 20, 6, 36> Local2;
	static constexpr unsigned MERGE_LIMIT = Local1::TILE;
};

template <>
struct Sm90Policy<8>
{
	typedef PartitionPolicy<384, 12> Partition;
	typedef LocalPolicy<128, 8, 6, 36> Local0;
	typedef LocalPolicy<256, 12, 6, 36> Local1;
	typedef LocalPolicy<512, 16, 6, 36> Local2;
	static constexpr unsigned MERGE_LIMIT = Local1::TILE;
};

template <>
struct Sm90Policy<16>
{
	typedef PartitionPolicy<256, 9> Partition;
	typedef LocalPolicy<128, 4, 6, 36> Local0;
	typedef LocalPolicy<256, 8, 6, 36> Local1;
	typedef LocalPolicy<512, 8, 6, 36> Local2;
	static constexpr unsigned MERGE_LIMIT = Local1::TILE;
};

template <>
struct Sm90Policy<24>
{
	typedef PartitionPolicy<256, 6> Partition;
	typedef LocalPolicy<128, 4, 6, 36> Local0;
	typedef LocalPolicy<256, 4, 6, 36> Local1;
	typedef LocalPolicy<256, 8, 6, 36> Local2;
	static constexpr unsigned MERGE_LIMIT = Local1::TILE;
};

template <>
struct Sm90Policy<32>
{
	typedef PartitionPolicy<256, 4> Partition;
	typedef LocalPolicy<128, 4, 6, 36> Local0;
	typedef LocalPolicy<256, 4, 6, 36> Local1;
	typedef LocalPolicy<256, 8, 6, 36> Local2;
	static constexpr unsigned MERGE_LIMIT = Local1::TILE;
};

/* the policy the engine builds with (one device architecture: sm_90) */
template <int KB>
struct Policy : Sm90Policy<KB>, CommonPolicy
{
	static constexpr unsigned LOCAL_LIMIT = Sm90Policy<KB>::Local2::TILE;
	static constexpr int NUM_LOCAL = 3;
};

}								/* namespace hrs */

#endif							/* HRS_POLICY_CUH */
