/* lib_num.c - whole numbers with their range: the whole string is the number, an overflow is
 * caught before it happens (not wrapped as atoi does), the range is the caller's.  Expected
 * values are written out by hand (2^63 - 1 = 9223372036854775807). */
#include "t.h"
#include "num.h"

static int is(const char *s, int64_t lo, int64_t hi, int64_t want)
{
	int64_t v = 12345;
	return num_int(s, lo, hi, &v) == NUM_OK && v == want;
}

static int rc_of(const char *s, int64_t lo, int64_t hi)
{
	int64_t v = 777;
	int rc = num_int(s, lo, hi, &v);
	return rc != NUM_OK && v != 777 ? 99 : rc;   /* a refusal leaves *v as it was */
}

int main(void)
{
	T_CASE("plain_counts") {
		T_ASSERT(is("0", 0, 10, 0));
		T_ASSERT(is("8", 1, 256, 8));
		T_ASSERT(is("256", 1, 256, 256));
		T_ASSERT(is("5_000_000", 0, INT64_MAX, 5000000));
		T_ASSERT(is("-5", -10, 10, -5));
		T_ASSERT(is("-0", 0, 10, 0));
	}
	T_CASE("int64_edges") {
		T_ASSERT(is("9223372036854775807", 0, INT64_MAX, INT64_MAX));
		T_ASSERT(is("-9223372036854775808", INT64_MIN, 0, INT64_MIN));
		T_ASSERT(rc_of("9223372036854775808", 0, INT64_MAX) == NUM_RANGE);
		T_ASSERT(rc_of("-9223372036854775809", INT64_MIN, 0) == NUM_RANGE);
		T_ASSERT(rc_of("99999999999999999999999", 0, INT64_MAX) == NUM_RANGE);
	}
	T_CASE("what_atoi_gets_wrong_is_refused") {
		T_ASSERT(rc_of("8x", 1, 256) == NUM_SYNTAX);
		T_ASSERT(rc_of("4294967297", 1, 256) == NUM_RANGE);   /* atoi: 1 */
		T_ASSERT(rc_of(" 8", 1, 256) == NUM_SYNTAX);
		T_ASSERT(rc_of("+8", 1, 256) == NUM_SYNTAX);
		T_ASSERT(rc_of("0x10", 0, 256) == NUM_SYNTAX);
		T_ASSERT(rc_of("", 0, 256) == NUM_SYNTAX);
		T_ASSERT(rc_of("-", -5, 256) == NUM_SYNTAX);
		T_ASSERT(rc_of("1e3", 0, 100000) == NUM_SYNTAX);
		T_ASSERT(rc_of("99999999999999999999999x", 0, 10) == NUM_SYNTAX);
	}
	T_CASE("underscores_only_between_digits") {
		T_ASSERT(rc_of("_5", 0, 100) == NUM_SYNTAX);
		T_ASSERT(rc_of("5_", 0, 100) == NUM_SYNTAX);
		T_ASSERT(rc_of("5__0", 0, 100) == NUM_SYNTAX);
	}
	T_CASE("range_is_the_callers") {
		T_ASSERT(rc_of("0", 1, 256) == NUM_RANGE);
		T_ASSERT(rc_of("257", 1, 256) == NUM_RANGE);
		T_ASSERT(rc_of("-1", 0, 256) == NUM_RANGE);
	}
	T_CASE("flag_messages") {
		char err[128];
		int64_t v;
		T_ASSERT(num_flag("8x", 1, 256, &v, err, sizeof err) == -1);
		T_STREQ(err, "'8x' is not a whole number");
		T_ASSERT(num_flag("4294967297", 1, 256, &v, err, sizeof err) == -1);
		T_STREQ(err, "4294967297 is outside 1..256");
	}
	T_CASE("scan_stops_at_the_first_non_digit_and_catches_overflow") {
		const char *p = "123 / 456";
		uint64_t v = 0;
		T_ASSERT(num_scan(&p, NULL, &v) == NUM_OK && v == 123 && *p == ' ');
		p = "18446744073709551615|";
		T_ASSERT(num_scan(&p, NULL, &v) == NUM_OK && v == UINT64_MAX && *p == '|');
		p = "99999999999999999999999 / 100";
		v = 7;
		T_ASSERT(num_scan(&p, NULL, &v) == NUM_RANGE && v == 7 && *p == ' ');
		p = "x";
		T_ASSERT(num_scan(&p, NULL, &v) == NUM_SYNTAX && *p == 'x');
		const char buf[] = "12345";
		p = buf;
		T_ASSERT(num_scan(&p, buf + 3, &v) == NUM_OK && v == 123 && p == buf + 3);
	}
	T_CASE("num_float_reads_pythons_float") {
		double d = 0;
		T_ASSERT(num_float("6e-5", &d) == 0 && d == 6e-5);
		T_ASSERT(num_float("1_000.5", &d) == 0 && d == 1000.5);
		d = 7;
		T_ASSERT(num_float("1__0", &d) < 0 && num_float("_1", &d) < 0 && num_float(" 1", &d) < 0);
		T_ASSERT(num_float("1x", &d) < 0 && num_float("inf", &d) < 0 && num_float("", &d) < 0);
		T_ASSERT(d == 7);
	}
	T_DONE();
}
