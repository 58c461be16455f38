/* digest - see digest.h. */
#include "digest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "msg.h"

static void to_hex(const unsigned char *md, char hex[65])
{
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

void digest_sha256_begin(struct digest_stream *d)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL))
		die(EXIT_FAILED, "out of memory sizing a SHA-256 context (libcrypto)");
	d->ctx = ctx;
}

void digest_sha256_add(struct digest_stream *d, const void *data, size_t len)
{
	if (len && !EVP_DigestUpdate(d->ctx, data, len))
		die(EXIT_FAILED, "libcrypto's SHA-256 failed");
}

void digest_sha256_end(struct digest_stream *d, char hex[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	if (!EVP_DigestFinal_ex(d->ctx, md, &n) || n != 32)
		die(EXIT_FAILED, "libcrypto's SHA-256 failed");
	to_hex(md, hex);
	digest_sha256_drop(d);
}

void digest_sha256_drop(struct digest_stream *d)
{
	EVP_MD_CTX_free(d->ctx);
	d->ctx = NULL;
}

void digest_sha256_hex(const void *data, size_t len, char hex[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	if (!EVP_Digest(data, len, md, &n, EVP_sha256(), NULL) || n != 32)
		die(EXIT_FAILED, "libcrypto's SHA-256 failed");
	to_hex(md, hex);
}

int digest_sha256_file(const char *path, char hex[65], uint64_t *size, char *err, size_t errlen)
{
	unsigned char md[EVP_MAX_MD_SIZE], *buf = malloc(1 << 20);
	unsigned int n = 0;
	uint64_t total = 0;
	ssize_t r = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int fd = open(path, O_RDONLY | O_CLOEXEC), e = 0;
	if (fd < 0 || !buf || !ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL))
		e = fd < 0 ? errno : ENOMEM;
	while (!e && (r = read(fd, buf, 1 << 20)) != 0) {
		if (r < 0) {
			if (errno != EINTR)
				e = errno;
			continue;
		}
		total += (uint64_t)r;
		if (!EVP_DigestUpdate(ctx, buf, (size_t)r))
			e = EIO;
	}
	if (!e && (!EVP_DigestFinal_ex(ctx, md, &n) || n != 32))
		e = EIO;
	if (fd >= 0)
		close(fd);
	EVP_MD_CTX_free(ctx);
	free(buf);
	if (e)
		return errf(err, errlen, "%s: %s", path, strerror(e));
	to_hex(md, hex);
	*size = total;
	return 0;
}
