/* cuda_fp16.h - the CPU executor's half precision (tests/cuda-exec).
 *
 * __half is IEEE binary16.  Conversions from float round as the CUDA Math API documents: _rn
 * (and the plain __float2half and the converting constructor) to nearest even, _rz toward zero,
 * _rd toward -inf, _ru toward +inf, with subnormals and overflow to infinity (or to the largest
 * finite value, 65504, where the direction says so); a NaN becomes the canonical 0x7FFF.
 * Conversions to float are exact.  Arithmetic is done in fp32 and rounded once. */
#ifndef CUDA_EXEC_FP16_H
#define CUDA_EXEC_FP16_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "vector_types.h"

struct __half_raw {
	unsigned short x;
};

static inline unsigned short cx_f2h(float f, int mode) /* 0 rn, 1 rz, 2 rd, 3 ru */
{
	uint32_t u;
	memcpy(&u, &f, 4);
	uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
	int neg = sign != 0;
	if (a > 0x7f800000u)
		return 0x7fff;
	if (a == 0x7f800000u)
		return (unsigned short)(sign | 0x7c00u);
	int e = a < 0x800000u ? -126 : (int)(a >> 23) - 127;
	uint32_t m = (a & 0x7fffffu) | (a >= 0x800000u ? 0x800000u : 0u); /* value = m 2^(e-23) */
	if (e > 15) {                                                        /* >= 2^16: overflow */
		int to_inf = mode == 0 || (mode == 2 && neg) || (mode == 3 && !neg);
		return (unsigned short)(sign | (to_inf ? 0x7c00u : 0x7bffu));
	}
	int E = e < -14 ? -14 : e;         /* the half's exponent; -14 with subnormals */
	int shift = (E - 10) - (e - 23);   /* q = value / 2^(E-10) = m >> shift; shift >= 13 */
	uint32_t q;
	uint64_t rem, halfway;
	if (shift >= 25) { /* below half the smallest subnormal: q 0, every bit is remainder */
		q = 0;
		rem = m;
		halfway = 1ull << 24; /* > m: never a tie, never above half */
	} else {
		q = m >> shift;
		rem = m & ((1u << shift) - 1);
		halfway = 1ull << (shift - 1);
	}
	int up = 0;
	if (mode == 0)
		up = rem > halfway || (rem == halfway && (q & 1u));
	else if (mode == 2)
		up = rem && neg;
	else if (mode == 3)
		up = rem && !neg;
	q += (uint32_t)up;
	uint32_t bits = ((uint32_t)(E + 14) << 10) + q; /* carries into the exponent as it should */
	return (unsigned short)(sign | bits);
}

static inline float cx_h2f(unsigned short h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
	if (e == 0x1f)
		u = sign | 0x7f800000u | (m << 13);
	else if (e)
		u = sign | ((e + 112u) << 23) | (m << 13);
	else if (!m)
		u = sign;
	else {
		float f = ldexpf((float)m, -24);
		memcpy(&u, &f, 4);
		u |= sign;
	}
	float f;
	memcpy(&f, &u, 4);
	return f;
}

struct __half {
	unsigned short __x;
	__half() = default;
	constexpr __half(const __half_raw &r) : __x(r.x) {}
	__half(float f) : __x(cx_f2h(f, 0)) {}
	__half(double d) : __x(cx_f2h((float)d, 0)) {}
	operator float() const { return cx_h2f(__x); }
	operator __half_raw() const { return __half_raw{__x}; }
	__half &operator=(float f) { __x = cx_f2h(f, 0); return *this; }
};
typedef __half half;

struct __attribute__((aligned(4))) __half2 {
	__half x, y;
	__half2() = default;
	constexpr __half2(__half a, __half b) : x(a), y(b) {}
};
typedef __half2 half2;

static inline __half cx_h(unsigned short x) { return __half(__half_raw{x}); }
static inline float __half2float(__half h) { return cx_h2f(h.__x); }
static inline __half __float2half(float f) { return cx_h(cx_f2h(f, 0)); }
static inline __half __float2half_rn(float f) { return cx_h(cx_f2h(f, 0)); }
static inline __half __float2half_rz(float f) { return cx_h(cx_f2h(f, 1)); }
static inline __half __float2half_rd(float f) { return cx_h(cx_f2h(f, 2)); }
static inline __half __float2half_ru(float f) { return cx_h(cx_f2h(f, 3)); }
static inline unsigned short __half_as_ushort(__half h) { return h.__x; }
static inline __half __ushort_as_half(unsigned short x) { return cx_h(x); }
static inline __half2 __floats2half2_rn(float a, float b) { return __half2(cx_h(cx_f2h(a, 0)), cx_h(cx_f2h(b, 0))); }
static inline __half2 __float22half2_rn(float2 f) { return __floats2half2_rn(f.x, f.y); }
static inline float2 __half22float2(__half2 h) { return make_float2(cx_h2f(h.x.__x), cx_h2f(h.y.__x)); }
static inline __half2 __halves2half2(__half a, __half b) { return __half2(a, b); }
static inline bool __hisnan(__half a) { return (a.__x & 0x7fffu) > 0x7c00u; }
static inline bool __hisinf(__half a) { return (a.__x & 0x7fffu) == 0x7c00u; }
#define CX_H_OP(name, expr)                                                                        \
	static inline __half name(__half a, __half b)                                              \
	{                                                                                          \
		float x = cx_h2f(a.__x), y = cx_h2f(b.__x);                                        \
		return cx_h(cx_f2h((expr), 0));                                                    \
	}
CX_H_OP(__hadd, x + y)
CX_H_OP(__hsub, x - y)
CX_H_OP(__hmul, x * y)
CX_H_OP(__hdiv, x / y)
#undef CX_H_OP

#endif
