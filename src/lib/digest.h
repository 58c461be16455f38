/* digest - SHA-256 of bytes and of files, as 64 lowercase hex digits.
 *
 * For records that say "this exact file": a checkpoint's manifest names the tokenizer files the
 * run trained with by path, size and SHA-256, and an export copies one only when its bytes still
 * hash the same (lmtk-checkpoint(5)).  libcrypto's EVP does the hashing (its SHA-256 uses the
 * CPU's SHA extensions where there are some); these files are megabytes, read once. */
#ifndef LMTK_DIGEST_H
#define LMTK_DIGEST_H

#include <stddef.h>
#include <stdint.h>

/* SHA-256 of len bytes; hex has room for 65 bytes (64 digits and the NUL). */
void digest_sha256_hex(const void *data, size_t len, char hex[65]);

/* SHA-256 of a whole file (read as it is, following links) and its size in bytes.
 * 0, or -1 + err naming the file. */
int digest_sha256_file(const char *path, char hex[65], uint64_t *size, char *err, size_t errlen);

#endif
