/* vector_types.h - the CPU executor's CUDA vector types (tests/cuda-exec): the sizes and
 * alignments of the CUDA headers, so that reinterpret_casts and 16-byte accesses mean what they
 * mean on the device. */
#ifndef CUDA_EXEC_VECTOR_TYPES_H
#define CUDA_EXEC_VECTOR_TYPES_H

#define CX_VEC2(T, name, al)                                                                       \
	struct __attribute__((aligned(al))) name {                                                 \
		T x, y;                                                                            \
	};                                                                                         \
	static inline name make_##name(T x, T y) { return name{x, y}; }
#define CX_VEC3(T, name)                                                                           \
	struct name {                                                                              \
		T x, y, z;                                                                         \
	};                                                                                         \
	static inline name make_##name(T x, T y, T z) { return name{x, y, z}; }
#define CX_VEC4(T, name, al)                                                                       \
	struct __attribute__((aligned(al))) name {                                                 \
		T x, y, z, w;                                                                      \
	};                                                                                         \
	static inline name make_##name(T x, T y, T z, T w) { return name{x, y, z, w}; }

CX_VEC2(char, char2, 2)
CX_VEC2(unsigned char, uchar2, 2)
CX_VEC4(char, char4, 4)
CX_VEC4(unsigned char, uchar4, 4)
CX_VEC2(short, short2, 4)
CX_VEC2(unsigned short, ushort2, 4)
CX_VEC4(short, short4, 8)
CX_VEC4(unsigned short, ushort4, 8)
CX_VEC2(int, int2, 8)
CX_VEC2(unsigned int, uint2, 8)
CX_VEC3(int, int3)
CX_VEC4(int, int4, 16)
CX_VEC4(unsigned int, uint4, 16)
CX_VEC2(float, float2, 8)
CX_VEC3(float, float3)
CX_VEC4(float, float4, 16)
CX_VEC2(long long, longlong2, 16)
CX_VEC2(unsigned long long, ulonglong2, 16)
CX_VEC2(double, double2, 16)

#undef CX_VEC2
#undef CX_VEC4

struct uint3 {
	unsigned int x, y, z;
};
static inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return uint3{x, y, z}; }
#undef CX_VEC3

struct dim3 {
	unsigned int x, y, z;
	constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
		: x(vx), y(vy), z(vz)
	{
	}
	constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
	constexpr operator uint3() const { return uint3{x, y, z}; }
};

#endif
