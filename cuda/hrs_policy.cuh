/*-------------------------------------------------------------------------
 *
 * hrs_policy.cuh
 *	  Tuning policies of the hybrid radix sort, one struct per
 *	  architecture, specialised per key width.  Every tuning constant of
 *	  the engine lives here and nowhere else.
 *
 * Partition: the counting-sort passes (histogram, scatter) process key
 * blocks of THREADS * ITEMS keys, staged through shared memory.
 * Local0..5: the shared-memory sorts for small buckets ("local sort
 * configurations" of Stehle & Jacobsen); a bucket goes to the smallest
 * configuration whose tile holds it, and buckets larger than Local5's tile
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
	static constexpr int IOTA_THREADS = 256;
	/* longest run of keys equal on a local sort's probe fixed in place */
	static constexpr int LOCAL_RUN_MAX = 16;
	/* sorts at or under this many rows skip the per-pass host sync */
	static constexpr unsigned SYNC_FREE_ROWS = 1u << 21;
	/* first wait between polls of a running sort, and the longest */
	static constexpr int POLL_MIN_US = 20;
	static constexpr int POLL_MAX_US = 1000;
};

/*
 * Hopper (sm_90): H100, H200.  Local sorts: six configurations of growing
 * tiles, so a bucket is padded by little; all use 6-bit block passes and
 * a 30-bit probe.
 */
template <int KB>
struct Sm90Policy;

template <>
struct Sm90Policy<4>
{
	typedef PartitionPolicy<512, 16> Partition;
	typedef LocalPolicy<128, 8, 6, 30> Local0;
	typedef LocalPolicy<256, 8, 6, 30> Local1;
	typedef LocalPolicy<256, 12, 6, 30> Local2;
	typedef LocalPolicy<256, 16, 6, 30> Local3;
	typedef LocalPolicy<512, 12, 6, 30> Local4;
	typedef LocalPolicy<512, 16, 6, 30> Local5;
	static constexpr unsigned MERGE_LIMIT = 2048;
};

template <>
struct Sm90Policy<8>
{
	typedef PartitionPolicy<384, 12> Partition;
	typedef LocalPolicy<128, 8, 6, 30> Local0;
	typedef LocalPolicy<256, 8, 6, 30> Local1;
	typedef LocalPolicy<256, 12, 6, 30> Local2;
	typedef LocalPolicy<256, 16, 6, 30> Local3;
	typedef LocalPolicy<512, 12, 6, 30> Local4;
	typedef LocalPolicy<512, 16, 6, 30> Local5;
	static constexpr unsigned MERGE_LIMIT = 2048;
};

template <>
struct Sm90Policy<16>
{
	typedef PartitionPolicy<256, 9> Partition;
	typedef LocalPolicy<128, 4, 6, 30> Local0;
	typedef LocalPolicy<128, 8, 6, 30> Local1;
	typedef LocalPolicy<256, 6, 6, 30> Local2;
	typedef LocalPolicy<256, 8, 6, 30> Local3;
	typedef LocalPolicy<256, 12, 6, 30> Local4;
	typedef LocalPolicy<512, 8, 6, 30> Local5;
	static constexpr unsigned MERGE_LIMIT = 1024;
};

template <>
struct Sm90Policy<24>
{
	typedef PartitionPolicy<256, 6> Partition;
	typedef LocalPolicy<64, 4, 6, 30> Local0;
	typedef LocalPolicy<128, 4, 6, 30> Local1;
	typedef LocalPolicy<128, 6, 6, 30> Local2;
	typedef LocalPolicy<256, 4, 6, 30> Local3;
	typedef LocalPolicy<256, 6, 6, 30> Local4;
	typedef LocalPolicy<256, 8, 6, 30> Local5;
	static constexpr unsigned MERGE_LIMIT = 512;
};

template <>
struct Sm90Policy<32>
{
	typedef PartitionPolicy<256, 4> Partition;
	typedef LocalPolicy<64, 4, 6, 30> Local0;
	typedef LocalPolicy<128, 4, 6, 30> Local1;
	typedef LocalPolicy<128, 6, 6, 30> Local2;
	typedef LocalPolicy<256, 4, 6, 30> Local3;
	typedef LocalPolicy<256, 6, 6, 30> Local4;
	typedef LocalPolicy<256, 8, 6, 30> Local5;
	static constexpr unsigned MERGE_LIMIT = 512;
};

/* the policy the engine builds with (one device architecture: sm_90) */
template <int KB>
struct Policy : Sm90Policy<KB>, CommonPolicy
{
	typedef Sm90Policy<KB> A;
	static constexpr int NUM_LOCAL = 6;
	static constexpr unsigned LOCAL_LIMIT = A::Local5::TILE;

	/* tile of local configuration c */
	__host__ __device__ static constexpr unsigned local_tile(int c)
	{
		return c == 0 ? A::Local0::TILE : c == 1 ? A::Local1::TILE :
			c == 2 ? A::Local2::TILE : c == 3 ? A::Local3::TILE :
			c == 4 ? A::Local4::TILE : A::Local5::TILE;
	}

	/* the smallest configuration whose tile holds n keys */
	__host__ __device__ static constexpr int local_config(size_t n)
	{
		return n <= local_tile(0) ? 0 : n <= local_tile(1) ? 1 :
			n <= local_tile(2) ? 2 : n <= local_tile(3) ? 3 :
			n <= local_tile(4) ? 4 : 5;
	}
};

/* local configuration c of a policy, as a type */
template <typename Pol, int C>
struct LocalAt;
template <typename Pol>
struct LocalAt<Pol, 0> { typedef typename Pol::Local0 type; };
template <typename Pol>
struct LocalAt<Pol, 1> { typedef typename Pol::Local1 type; };
template <typename Pol>
struct LocalAt<Pol, 2> { typedef typename Pol::Local2 type; };
template <typename Pol>
struct LocalAt<Pol, 3> { typedef typename Pol::Local3 type; };
template <typename Pol>
struct LocalAt<Pol, 4> { typedef typename Pol::Local4 type; };
template <typename Pol>
struct LocalAt<Pol, 5> { typedef typename Pol::Local5 type; };

}								/* namespace hrs */

#endif							/* HRS_POLICY_CUH */
