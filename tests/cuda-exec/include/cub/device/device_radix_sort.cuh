/* cub/device/device_radix_sort.cuh - the CPU executor's CUB radix sort (tests/cuda-exec).
 *
 * DeviceRadixSort as CUB documents it: a stable sort on bits [begin_bit, end_bit) of the keys,
 * ascending (or descending), signed integer keys ordered as numbers (the sign bit flipped
 * before sorting), floats in numeric order (-0.0 before +0.0).  The first call, with a null
 * d_temp_storage, only reports the temporary storage it needs; the second sorts, on the stream,
 * when the host synchronises.  Every buffer is checked against the device allocations. */
#ifndef CUDA_EXEC_CUB_DEVICE_RADIX_SORT_CUH
#define CUDA_EXEC_CUB_DEVICE_RADIX_SORT_CUH

#include <stdint.h>

#include <algorithm>
#include <numeric>
#include <type_traits>
#include <vector>

#include "../../cx_host.h"

namespace cub {

template <typename K> static inline uint64_t cx_radix_bits(K k)
{
	if constexpr (std::is_floating_point<K>::value) {
		using U = typename std::conditional<sizeof(K) == 4, uint32_t, uint64_t>::type;
		U u;
		memcpy(&u, &k, sizeof u);
		const U sign = (U)1 << (sizeof(U) * 8 - 1);
		return (uint64_t)((u & sign) ? ~u : (u | sign));
	} else if constexpr (std::is_signed<K>::value) {
		using U = typename std::make_unsigned<K>::type;
		return (uint64_t)((U)k ^ ((U)1 << (sizeof(K) * 8 - 1)));
	} else {
		return (uint64_t)k;
	}
}

struct DeviceRadixSort {
	template <typename K, typename V, typename N>
	static cudaError_t cx_sort(void *temp, size_t &temp_bytes, const K *kin, K *kout,
				   const V *vin, V *vout, N n, int begin_bit, int end_bit,
				   cudaStream_t stream, bool desc, bool pairs)
	{
		size_t need = 256 + (size_t)n * (sizeof(K) + (pairs ? sizeof(V) : 0)) * 2;
		if (!temp) {
			temp_bytes = need;
			return cudaSuccess;
		}
		const char *what = pairs ? "cub::DeviceRadixSort::SortPairs" : "cub::DeviceRadixSort::SortKeys";
		if (temp_bytes < need || n < 0 || begin_bit < 0 || end_bit > (int)(sizeof(K) * 8) ||
		    begin_bit >= end_bit) {
			cx_say(what, "bad arguments: temp_storage_bytes %zu (needs %zu), num_items %lld, "
			       "bits [%d, %d)", temp_bytes, need, (long long)n, begin_bit, end_bit);
			return cudaErrorInvalidValue;
		}
		size_t cnt = (size_t)n;
		if (!cx_device_range(temp, temp_bytes, what, "d_temp_storage") ||
		    !cx_device_range(kin, cnt * sizeof(K), what, "d_keys_in") ||
		    !cx_device_range(kout, cnt * sizeof(K), what, "d_keys_out") ||
		    (pairs && !cx_device_range(vin, cnt * sizeof(V), what, "d_values_in")) ||
		    (pairs && !cx_device_range(vout, cnt * sizeof(V), what, "d_values_out")))
			return cudaErrorInvalidValue;
		return cx_enqueue(stream, what, [=]() {
			uint64_t mask = end_bit - begin_bit >= 64 ? ~0ull
								  : ((1ull << (end_bit - begin_bit)) - 1);
			std::vector<size_t> idx(cnt);
			std::iota(idx.begin(), idx.end(), (size_t)0);
			std::vector<uint64_t> key(cnt);
			for (size_t i = 0; i < cnt; i++)
				key[i] = (cx_radix_bits(kin[i]) >> begin_bit) & mask;
			std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
				return desc ? key[a] > key[b] : key[a] < key[b];
			});
			std::vector<K> ks(cnt);
			std::vector<V> vs(pairs ? cnt : 0);
			for (size_t i = 0; i < cnt; i++) {
				ks[i] = kin[idx[i]];
				if (pairs)
					vs[i] = vin[idx[i]];
			}
			std::copy(ks.begin(), ks.end(), kout);
			if (pairs)
				std::copy(vs.begin(), vs.end(), vout);
		});
	}

	template <typename K, typename V, typename N>
	static cudaError_t SortPairs(void *temp, size_t &temp_bytes, const K *kin, K *kout,
				     const V *vin, V *vout, N n, int begin_bit = 0,
				     int end_bit = sizeof(K) * 8, cudaStream_t stream = 0)
	{
		return cx_sort(temp, temp_bytes, kin, kout, vin, vout, n, begin_bit, end_bit, stream,
			       false, true);
	}
	template <typename K, typename V, typename N>
	static cudaError_t SortPairsDescending(void *temp, size_t &temp_bytes, const K *kin,
					       K *kout, const V *vin, V *vout, N n,
					       int begin_bit = 0, int end_bit = sizeof(K) * 8,
					       cudaStream_t stream = 0)
	{
		return cx_sort(temp, temp_bytes, kin, kout, vin, vout, n, begin_bit, end_bit, stream,
			       true, true);
	}
	template <typename K, typename N>
	static cudaError_t SortKeys(void *temp, size_t &temp_bytes, const K *kin, K *kout, N n,
				    int begin_bit = 0, int end_bit = sizeof(K) * 8,
				    cudaStream_t stream = 0)
	{
		return cx_sort(temp, temp_bytes, kin, kout, (const char *)nullptr, (char *)nullptr, n,
			       begin_bit, end_bit, stream, false, false);
	}
};

} // namespace cub

#endif
