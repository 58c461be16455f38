/* cuda_bf16.h - the CPU executor's bfloat16 (tests/cuda-exec).
 *
 * __nv_bfloat16 is the upper half of an IEEE binary32.  Conversions from float round as the
 * CUDA Math API documents: _rn to nearest even (also the plain __float2bfloat16 and the
 * converting constructor), _rz toward zero, _rd toward -inf, _ru toward +inf; a NaN becomes the
 * canonical 0x7FFF.  Conversions to float are exact.  Arithmetic on bf16 values is done in fp32
 * and rounded once to nearest even. */
#ifndef CUDA_EXEC_BF16_H
#define CUDA_EXEC_BF16_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cuda_fp16.h"
#include "vector_types.h"

struct __nv_bfloat16_raw {
	unsigned short x;
};

static inline unsigned short cx_f2bf(float f, int mode) /* 0 rn, 1 rz, 2 rd, 3 ru */
{
	uint32_t u;
	memcpy(&u, &f, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return 0x7fff;
	uint32_t r = u >> 16, rest = u & 0xffffu, neg = u >> 31;
	switch (mode) {
	case 0:
		return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
	case 1:
		return (unsigned short)r;
	case 2:
		return (unsigned short)(r + (rest && neg ? 1u : 0u));
	default:
		return (unsigned short)(r + (rest && !neg ? 1u : 0u));
	}
}

static inline float cx_bf2f(unsigned short h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* double -> bf16 to nearest even without double rounding: double -> float rounding to odd, then
 * float -> bf16 to nearest even (the float keeps 16 more bits than bf16) */
static inline unsigned short cx_d2bf(double d)
{
	float f = (float)d;
	if (!isnan(d) && !isinf(f) && (double)f != d) {
		if (fabs((double)f) > fabs(d))
			f = nextafterf(f, 0.0f);
		uint32_t u;
		memcpy(&u, &f, 4);
		u |= 1u;
		memcpy(&f, &u, 4);
	}
	return cx_f2bf(f, 0);
}

struct __nv_bfloat16 {
	unsigned short __x;
	__nv_bfloat16() = default;
	constexpr __nv_bfloat16(const __nv_bfloat16_raw &r) : __x(r.x) {}
	__nv_bfloat16(float f) : __x(cx_f2bf(f, 0)) {}
	__nv_bfloat16(double d) : __x(cx_d2bf(d)) {}
	__nv_bfloat16(int i) : __x(cx_d2bf((double)i)) {}
	__nv_bfloat16(unsigned i) : __x(cx_d2bf((double)i)) {}
	__nv_bfloat16(long long i) : __x(cx_d2bf((double)i)) {}
	operator float() const { return cx_bf2f(__x); }
	operator __nv_bfloat16_raw() const { return __nv_bfloat16_raw{__x}; }
	__nv_bfloat16 &operator=(float f) { __x = cx_f2bf(f, 0); return *this; }
	__nv_bfloat16 &operator=(double d) { __x = cx_d2bf(d); return *this; }
};
typedef __nv_bfloat16 nv_bfloat16;

struct __attribute__((aligned(4))) __nv_bfloat162 {
	__nv_bfloat16 x, y;
	__nv_bfloat162() = default;
	constexpr __nv_bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) : x(a), y(b) {}
};
typedef __nv_bfloat162 nv_bfloat162;

static inline __nv_bfloat16 cx_bf(unsigned short x) { return __nv_bfloat16(__nv_bfloat16_raw{x}); }

static inline float __bfloat162float(__nv_bfloat16 h) { return cx_bf2f(h.__x); }
static inline __nv_bfloat16 __float2bfloat16(float f) { return cx_bf(cx_f2bf(f, 0)); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return cx_bf(cx_f2bf(f, 0)); }
static inline __nv_bfloat16 __float2bfloat16_rz(float f) { return cx_bf(cx_f2bf(f, 1)); }
static inline __nv_bfloat16 __float2bfloat16_rd(float f) { return cx_bf(cx_f2bf(f, 2)); }
static inline __nv_bfloat16 __float2bfloat16_ru(float f) { return cx_bf(cx_f2bf(f, 3)); }
static inline __nv_bfloat16 __double2bfloat16(double d) { return cx_bf(cx_d2bf(d)); }
static inline __nv_bfloat16 __int2bfloat16_rn(int i) { return cx_bf(cx_d2bf((double)i)); }
static inline int __bfloat162int_rz(__nv_bfloat16 h) { return (int)cx_bf2f(h.__x); }
static inline int __bfloat162int_rn(__nv_bfloat16 h) { return (int)nearbyintf(cx_bf2f(h.__x)); }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short x) { return cx_bf(x); }
static inline short __bfloat16_as_short(__nv_bfloat16 h) { return (short)h.__x; }

static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b)
{
	return __nv_bfloat162(cx_bf(cx_f2bf(a, 0)), cx_bf(cx_f2bf(b, 0)));
}
static inline __nv_bfloat162 __float22bfloat162_rn(float2 f) { return __floats2bfloat162_rn(f.x, f.y); }
static inline __nv_bfloat162 __float2bfloat162_rn(float f) { return __floats2bfloat162_rn(f, f); }
static inline float2 __bfloat1622float2(__nv_bfloat162 h)
{
	return make_float2(cx_bf2f(h.x.__x), cx_bf2f(h.y.__x));
}
static inline float __low2float(__nv_bfloat162 h) { return cx_bf2f(h.x.__x); }
static inline float __high2float(__nv_bfloat162 h) { return cx_bf2f(h.y.__x); }
static inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 h) { return h.x; }
static inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 h) { return h.y; }
static inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat162(a, b); }
static inline __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 a) { return __nv_bfloat162(a, a); }
static inline __nv_bfloat162 make_bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat162(a, b); }

/* arithmetic: fp32, one rounding to nearest even */
#define CX_BF_OP(name, expr)                                                                       \
	static inline __nv_bfloat16 name(__nv_bfloat16 a, __nv_bfloat16 b)                        \
	{                                                                                          \
		float x = cx_bf2f(a.__x), y = cx_bf2f(b.__x);                                      \
		return cx_bf(cx_f2bf((expr), 0));                                                  \
	}
CX_BF_OP(__hadd, x + y)
CX_BF_OP(__hsub, x - y)
CX_BF_OP(__hmul, x * y)
CX_BF_OP(__hdiv, x / y)
CX_BF_OP(__hmax, fmaxf(x, y))
CX_BF_OP(__hmin, fminf(x, y))
#undef CX_BF_OP
static inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c)
{
	/* the product of two bf16 is exact in fp32, so the fp32 fma rounds once before bf16 */
	return __double2bfloat16((double)cx_bf2f(a.__x) * cx_bf2f(b.__x) + cx_bf2f(c.__x));
}
static inline __nv_bfloat16 __hneg(__nv_bfloat16 a) { return cx_bf((unsigned short)(a.__x ^ 0x8000u)); }
static inline __nv_bfloat16 __habs(__nv_bfloat16 a) { return cx_bf((unsigned short)(a.__x & 0x7fffu)); }
static inline bool __hisnan(__nv_bfloat16 a) { return (a.__x & 0x7fffu) > 0x7f80u; }
static inline bool __hisinf(__nv_bfloat16 a) { return (a.__x & 0x7fffu) == 0x7f80u; }
static inline __nv_bfloat162 __hadd2(__nv_bfloat162 a, __nv_bfloat162 b)
{
	return __nv_bfloat162(__hadd(a.x, b.x), __hadd(a.y, b.y));
}
static inline __nv_bfloat162 __hmul2(__nv_bfloat162 a, __nv_bfloat162 b)
{
	return __nv_bfloat162(__hmul(a.x, b.x), __hmul(a.y, b.y));
}
static inline __nv_bfloat162 __hfma2(__nv_bfloat162 a, __nv_bfloat162 b, __nv_bfloat162 c)
{
	return __nv_bfloat162(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));
}

#endif
