/* lib_units.c - sizes, durations and percentages as users type them, and the formats printed.
 * Expected values are worked out by hand: 1 KiB = 1024 B, and Python's str(timedelta(seconds=N)). */
#include "t.h"
#include "units.h"

#include <limits.h>
#include <stdlib.h>
#include <time.h>

static int size_is(const char *s, unsigned long long want)
{
	unsigned long long v = 12345;  /* any value the parse must overwrite */
	return units_size(s, &v) == 0 && v == want;
}

static int size_bad(const char *s)
{
	unsigned long long v = 777;
	return units_size(s, &v) == -1 && v == 777;
}

static int dur_is(const char *s, long want)
{
	long v = -12345;
	return units_duration(s, &v) == 0 && v == want;
}

static int dur_bad(const char *s)
{
	long v = 777;
	return units_duration(s, &v) == -1 && v == 777;
}

static int pct_is(const char *s, double want)
{
	double v = -1;
	return units_percent(s, &v) == 0 && v == want;
}

static int pct_bad(const char *s)
{
	double v = 777;
	return units_percent(s, &v) == -1 && v == 777;
}

static const char *delta(long s)
{
	static char buf[64];
	return units_fmt_delta(s, buf, sizeof buf);
}

static const char *size(unsigned long long b)
{
	static char buf[64];
	return units_fmt_size(b, buf, sizeof buf);
}

int main(void)
{
	T_CASE("units_size_suffixes_are_binary") {
		T_ASSERT(size_is("10M", 10485760ULL));           /* 10 * 1024^2 */
		T_ASSERT(size_is("1K", 1024ULL));
		T_ASSERT(size_is("1.5G", 1610612736ULL));        /* 1.5 * 1073741824 */
		T_ASSERT(size_is("100T", 109951162777600ULL));   /* 100 * 1099511627776 */
		T_ASSERT(size_is("2P", 2251799813685248ULL));    /* 2 * 1024^5 */
		T_ASSERT(size_is("15E", 17293822569102704640ULL)); /* 15 * 2^60, still below 2^64 */
	}

	T_CASE("units_size_bare_number_is_bytes") {
		T_ASSERT(size_is("512", 512ULL));
		T_ASSERT(size_is("0", 0ULL));
		T_ASSERT(size_is("512B", 512ULL));
	}

	T_CASE("units_size_mib_mb_and_lowercase_all_mean_binary") {
		T_ASSERT(size_is("10MiB", 10485760ULL));
		T_ASSERT(size_is("10MB", 10485760ULL));
		T_ASSERT(size_is("10m", 10485760ULL));
		T_ASSERT(size_is("10mib", 10485760ULL));
		T_ASSERT(size_is("3kb", 3072ULL));
	}

	T_CASE("units_size_rejects_malformed") {
		T_ASSERT(size_bad(""));
		T_ASSERT(size_bad(NULL));
		T_ASSERT(size_bad("-1"));
		T_ASSERT(size_bad("10X"));
		T_ASSERT(size_bad("M"));
		T_ASSERT(size_bad(" 10M"));
		T_ASSERT(size_bad("10 M"));
		T_ASSERT(size_bad("10MiBs"));
		T_ASSERT(size_bad("10BB"));
		T_ASSERT(size_bad("10Bi"));
	}

	T_CASE("units_size_rejects_more_than_64_bits") {
		T_ASSERT(size_bad("16E"));                      /* exactly 2^64 */
		T_ASSERT(size_bad("99999999999999999999"));     /* > 2^64 - 1 */
	}

	T_CASE("units_duration_bare_number_is_minutes") {
		T_ASSERT(dur_is("30", 1800));
		T_ASSERT(dur_is("0", 0));
		T_ASSERT(dur_is("1.5", 90));
	}

	T_CASE("units_duration_suffixes") {
		T_ASSERT(dur_is("90s", 90));
		T_ASSERT(dur_is("90m", 5400));
		T_ASSERT(dur_is("6h", 21600));
		T_ASSERT(dur_is("1d", 86400));
		T_ASSERT(dur_is("1.5h", 5400));
		T_ASSERT(dur_is("0.5s", 1));   /* rounds to the nearest second */
	}

	T_CASE("units_duration_rejects_malformed") {
		T_ASSERT(dur_bad("x"));
		T_ASSERT(dur_bad("5w"));
		T_ASSERT(dur_bad(""));
		T_ASSERT(dur_bad(NULL));
		T_ASSERT(dur_bad("-5"));
		T_ASSERT(dur_bad("h"));
		T_ASSERT(dur_bad("5hh"));
		T_ASSERT(dur_bad("5 h"));
	}

	T_CASE("units_duration_rejects_what_a_long_cannot_hold") {
		/* 1e20 days: the conversion to long would be undefined, and on x86 negative */
		T_ASSERT(dur_bad("100000000000000000000d"));
		T_ASSERT(dur_bad("1e300"));
	}

	T_CASE("units_percent_with_and_without_sign") {
		T_ASSERT(pct_is("85%", 85.0));
		T_ASSERT(pct_is("85", 85.0));
		T_ASSERT(pct_is("0", 0.0));
		T_ASSERT(pct_is("100%", 100.0));
		T_ASSERT(pct_is("99.5%", 99.5));
	}

	T_CASE("units_percent_rejects_out_of_range_and_junk") {
		T_ASSERT(pct_bad("101"));
		T_ASSERT(pct_bad("100.1%"));
		T_ASSERT(pct_bad("-1"));
		T_ASSERT(pct_bad("abc"));
		T_ASSERT(pct_bad(""));
		T_ASSERT(pct_bad(NULL));
		T_ASSERT(pct_bad("%"));
		T_ASSERT(pct_bad("85%%"));
		T_ASSERT(pct_bad("85 %"));
		T_ASSERT(pct_bad("nan"));
		T_ASSERT(pct_bad("85x"));
	}

	T_CASE("units_fmt_delta_matches_python_timedelta") {
		T_STREQ(delta(0), "0:00:00");
		T_STREQ(delta(59), "0:00:59");
		T_STREQ(delta(60), "0:01:00");
		T_STREQ(delta(3600), "1:00:00");
		T_STREQ(delta(86399), "23:59:59");
		T_STREQ(delta(86400), "1 day, 0:00:00");
		T_STREQ(delta(90061), "1 day, 1:01:01");           /* 86400 + 3600 + 60 + 1 */
		T_STREQ(delta(2 * 86400 + 7 * 3600 + 24 * 60 + 19), "2 days, 7:24:19");
		T_STREQ(delta(400 * 86400L), "400 days, 0:00:00");
	}

	T_CASE("units_fmt_size_bytes_then_two_decimals") {
		T_STREQ(size(0), "0 B");
		T_STREQ(size(512), "512 B");
		T_STREQ(size(1023), "1023 B");
		T_STREQ(size(1024), "1.00 KiB");
		T_STREQ(size(1536), "1.50 KiB");
		T_STREQ(size(10485760ULL), "10.00 MiB");
		T_STREQ(size(1610612736ULL), "1.50 GiB");
		T_STREQ(size(109951162777600ULL), "100.00 TiB");
		T_STREQ(size(1152921504606846976ULL), "1.00 EiB");  /* 2^60 */
		T_STREQ(size(18446744073709551615ULL), "16.00 EiB");
	}

	T_CASE("units_fmt_size_reads_back_what_units_size_parses") {
		unsigned long long v = 0;
		T_ASSERT(units_size("1.5G", &v) == 0);
		T_STREQ(size(v), "1.50 GiB");
		T_ASSERT(units_size("750K", &v) == 0);
		T_STREQ(size(v), "750.00 KiB");
	}

	T_CASE("units_fmt_time_is_local_time") {
		char buf[64];
		setenv("TZ", "UTC", 1);
		tzset();
		T_STREQ(units_fmt_time(0, buf, sizeof buf), "1970-01-01 00:00:00");
		/* 2000-01-01 is 10957 days after the epoch; +59 days is the leap day */
		T_STREQ(units_fmt_time(951782400 + 3661, buf, sizeof buf), "2000-02-29 01:01:01");
		setenv("TZ", "UTC-2", 1);  /* POSIX sign: two hours east of UTC */
		tzset();
		T_STREQ(units_fmt_time(0, buf, sizeof buf), "1970-01-01 02:00:00");
	}

	T_DONE();
}
