/* fuzz: whole numbers from flags, config files and log lines (src/lib/num.c).  A number accepted
 * is in its range and prints back as the digits given (less underscores and a "-0"'s sign); a
 * scan never reads past its end. */
#include "fuzz.h"
#include "num.h"

#include <inttypes.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char s[64], back[64], plain[64];
	size_t n = size < sizeof s - 1 ? size : sizeof s - 1, k = 0;
	memcpy(s, data, n);
	s[n] = '\0';
	int64_t v, lo = n ? -(int64_t)(data[0] % 3) * 1000 : 0, hi = INT64_MAX;
	if (num_int(s, lo, hi, &v) == NUM_OK) {
		if (v < lo || v > hi)
			abort();
		for (size_t i = 0; s[i]; i++)
			if (s[i] != '_')
				plain[k++] = s[i];
		plain[k] = '\0';
		const char *digits = plain[0] == '-' ? plain + 1 : plain;
		while (digits[0] == '0' && digits[1])
			digits++;   /* leading zeros */
		snprintf(back, sizeof back, "%" PRId64, v < 0 ? -v : v);
		if (strcmp(back, digits) != 0)
			abort();
	}
	const char *p = (const char *)data, *end = p + size;
	uint64_t u;
	while (p < end) {
		const char *q = p;
		if (num_scan(&q, end, &u) == NUM_SYNTAX)
			q = p + 1;
		if (q > end || q <= p)
			abort();
		p = q;
	}
	return 0;
}
