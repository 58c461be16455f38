/* crc32c - CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of TensorBoard
 * records and of checkpoint shards.  crc32c("123456789") = 0xE3069283.
 *
 * On x86-64 with SSE4.2 the crc32 instruction does 8 bytes per step (several GB/s, so
 * checksumming a checkpoint costs little next to writing it); elsewhere a byte-wise table. */
#ifndef LMTK_CRC32C_H
#define LMTK_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continues a CRC: crc32c_update(crc32c_update(0, a, n), b, m) == crc32c of a then b. */
uint32_t crc32c_update(uint32_t crc, const void *p, size_t n);
static inline uint32_t crc32c(const void *p, size_t n) { return crc32c_update(0, p, n); }

#endif
