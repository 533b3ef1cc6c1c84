/*-------------------------------------------------------------------------
 *
 * hrs_key.cuh
 *	  Key traits of the hybrid radix sort: the device type of each key
 *	  width of gpusort_engine.h, its digits and how CUB's block sort sees it.
 *
 * Digit p of a key is its p-th most significant byte (p = 0 is the most
 * significant), so partitioning passes walk p = 0, 1, 2, ...  Bit numbers
 * given to CUB count from the least significant bit of the whole key.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef HRS_KEY_CUH
#define HRS_KEY_CUH

#include <stdint.h>
#include <cuda/std/tuple>

namespace hrs
{

/* a key of W 64-bit words, word 0 most significant (engine key format) */
template <int W>
struct alignas(W % 2 == 0 ? 16 : 8) WideKey
{
	uint64_t	w[W];
};

/* tells CUB's block radix sort how to read a WideKey: word 0 first */
template <int W>
struct WideKeyDecomposer;

template <>
struct WideKeyDecomposer<2>
{
	__host__ __device__ ::cuda::std::tuple<uint64_t &, uint64_t &>
	operator()(WideKey<2> &k) const
	{
		return {k.w[0], k.w[1]};
	}
};

template <>
struct WideKeyDecomposer<3>
{
	__host__ __device__ ::cuda::std::tuple<uint64_t &, uint64_t &, uint64_t &>
	operator()(WideKey<3> &k) const
	{
		return {k.w[0], k.w[1], k.w[2]};
	}
};

template <>
struct WideKeyDecomposer<4>
{
	__host__ __device__ ::cuda::std::tuple<uint64_t &, uint64_t &, uint64_t &, uint64_t &>
	operator()(WideKey<4> &k) const
	{
		return {k.w[0], k.w[1], k.w[2], k.w[3]};
	}
};

/*
 * KeyTraits<KB>: everything the agents need to know about a key of KB
 * bytes.  WORDS is the number of machine words (uint32 for KB 4, uint64
 * otherwise); word(k, j) reads word j widened to 64 bits.
 */
template <int KB>
struct KeyTraits
{
	static constexpr int WORDS = KB / 8;
	static constexpr int WORD_BITS = 64;
	static constexpr bool NATIVE = false;
	typedef WideKey<KB / 8> Key;
	typedef WideKeyDecomposer<KB / 8> Decomposer;

	__device__ __forceinline__ static uint64_t word(const Key &k, int j)
	{
		return k.w[j];
	}
	__device__ __forceinline__ static unsigned digit(const Key &k, int p)
	{
		return (unsigned) (k.w[p >> 3] >> (56 - 8 * (p & 7))) & 0xFFu;
	}
	__device__ __forceinline__ static Key from_words(const uint64_t *w)
	{
		Key			k;

#pragma unroll
		for (int j = 0; j < WORDS; j++)
			k.w[j] = w[j];
		return k;
	}
	__device__ __forceinline__ static Key max_key()
	{
		Key			k;

#pragma unroll
		for (int j = 0; j < WORDS; j++)
			k.w[j] = ~(uint64_t) 0;
		return k;
	}
};

template <>
struct KeyTraits<4>
{
	static constexpr int WORDS = 1;
	static constexpr int WORD_BITS = 32;
	static constexpr bool NATIVE = true;
	typedef uint32_t Key;
	typedef void Decomposer;

	__device__ __forceinline__ static uint64_t word(const Key &k, int)
	{
		return k;
	}
	__device__ __forceinline__ static unsigned digit(const Key &k, int p)
	{
		return (k >> (24 - 8 * p)) & 0xFFu;
	}
	__device__ __forceinline__ static Key from_words(const uint64_t *w)
	{
		return (uint32_t) w[0];
	}
	__device__ __forceinline__ static Key max_key()
	{
		return ~(uint32_t) 0;
	}
};

template <>
struct KeyTraits<8>
{
	static constexpr int WORDS = 1;
	static constexpr int WORD_BITS = 64;
	static constexpr bool NATIVE = true;
	typedef uint64_t Key;
	typedef void Decomposer;

	__device__ __forceinline__ static uint64_t word(const Key &k, int)
	{
		return k;
	}
	__device__ __forceinline__ static unsigned digit(const Key &k, int p)
	{
		return (unsigned) (k >> (56 - 8 * p)) & 0xFFu;
	}
	__device__ __forceinline__ static Key from_words(const uint64_t *w)
	{
		return w[0];
	}
	__device__ __forceinline__ static Key max_key()
	{
		return ~(uint64_t) 0;
	}
};

}								/* namespace hrs */

#endif							/* HRS_KEY_CUH */
