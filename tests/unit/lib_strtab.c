/* lib_strtab.c - the string table: caller-given ids with holes and duplicates refused, interned ids
 * in order of first sight, lookups in one and two parts with a hash built in steps, and 100k
 * strings through several growths checked against their own record. */
#include "t.h"

#include "strtab.h"

#include <stdio.h>

int main(void)
{
	T_CASE("an_empty_table_finds_nothing") {
		struct strtab t = {0};
		size_t len = 7;
		T_ASSERT(strtab_find(&t, "a", 1) == STRTAB_NONE);
		T_ASSERT(strtab_str(&t, 0, &len) == NULL && len == 0);
		T_ASSERT(strtab_count(&t) == 0 && strtab_id_end(&t) == 0);
		strtab_free(&t);
	}
	T_CASE("put_keeps_the_callers_ids_and_their_holes") {
		struct strtab t = {0};
		uint32_t had = 0;
		size_t len;
		T_ASSERT(strtab_put(&t, "hello", 5, 7, &had) == 0);
		T_ASSERT(strtab_put(&t, "", 0, 2, &had) == 0);
		T_ASSERT(strtab_put(&t, "a\0b", 3, 5000, &had) == 0);
		T_ASSERT(strtab_find(&t, "hello", 5) == 7);
		T_ASSERT(strtab_find(&t, "", 0) == 2);
		T_ASSERT(strtab_find(&t, "a\0b", 3) == 5000);
		T_ASSERT(strtab_find(&t, "a", 1) == STRTAB_NONE);
		T_ASSERT(strtab_find(&t, "hell", 4) == STRTAB_NONE);
		T_ASSERT(strtab_str(&t, 3, &len) == NULL);
		T_ASSERT(strtab_str(&t, 5001, &len) == NULL);
		const char *s = strtab_str(&t, 7, &len);
		T_ASSERT(s && len == 5 && strcmp(s, "hello") == 0);  /* NUL-terminated */
		s = strtab_str(&t, 5000, &len);
		T_ASSERT(s && len == 3 && memcmp(s, "a\0b", 3) == 0);
		T_ASSERT(strtab_count(&t) == 3 && strtab_id_end(&t) == 5001);
		strtab_free(&t);
	}
	T_CASE("put_refuses_a_string_or_an_id_twice_and_leaves_the_table_as_it_was") {
		struct strtab t = {0};
		uint32_t had = 0;
		size_t len;
		T_ASSERT(strtab_put(&t, "x", 1, 3, &had) == 0);
		T_ASSERT(strtab_put(&t, "x", 1, 4, &had) == STRTAB_DUP_STR && had == 3);
		T_ASSERT(strtab_put(&t, "y", 1, 3, &had) == STRTAB_DUP_ID);
		T_ASSERT(strtab_put(&t, "z", 1, STRTAB_NONE, &had) == -1);
		T_ASSERT(strtab_find(&t, "y", 1) == STRTAB_NONE && strtab_find(&t, "z", 1) == STRTAB_NONE);
		T_ASSERT(strtab_str(&t, 4, &len) == NULL);
		T_ASSERT(strtab_count(&t) == 1 && strtab_id_end(&t) == 4);
		strtab_free(&t);
	}
	T_CASE("intern_numbers_strings_in_order_of_first_sight") {
		struct strtab t = {0};
		T_ASSERT(strtab_intern(&t, "the", 3) == 0);
		T_ASSERT(strtab_intern(&t, "cat", 3) == 1);
		T_ASSERT(strtab_intern(&t, "the", 3) == 0);
		T_ASSERT(strtab_intern(&t, "th", 2) == 2);
		T_ASSERT(strtab_count(&t) == 3);
		strtab_free(&t);
	}
	T_CASE("a_hash_built_in_steps_finds_the_string_in_two_parts") {
		struct strtab t = {0};
		uint32_t had;
		T_ASSERT(strtab_put(&t, "##ing", 5, 11, &had) == 0);
		uint64_t pre = strtab_hash_step(STRTAB_HASH0, "##", 2);
		uint64_t h = strtab_hash_fin(strtab_hash_step(pre, "ing", 3));
		T_ASSERT(h == strtab_hash("##ing", 5));
		T_ASSERT(strtab_find_hash2(&t, h, "##", 2, "ing", 3) == 11);
		T_ASSERT(strtab_find_hash2(&t, h, "#", 1, "#ing", 4) == 11);
		T_ASSERT(strtab_find_hash(&t, h, "##ing", 5) == 11);
		/* same hash, other bytes: the bytes decide */
		T_ASSERT(strtab_find_hash2(&t, h, "##", 2, "ong", 3) == STRTAB_NONE);
		strtab_free(&t);
	}
	T_CASE("hundred_thousand_strings_survive_every_growth") {
		struct strtab t = {0};
		char b[32];
		int bad = 0;
		for (uint32_t i = 0; i < 100000; i++) {
			int n = snprintf(b, sizeof b, "w%u", i * 2654435761u);
			bad += strtab_intern(&t, b, (size_t)n) != i;
		}
		for (uint32_t i = 0; i < 100000; i++) {
			int n = snprintf(b, sizeof b, "w%u", i * 2654435761u);
			size_t len;
			const char *s = strtab_str(&t, i, &len);
			bad += strtab_find(&t, b, (size_t)n) != i;
			bad += !s || len != (size_t)n || memcmp(s, b, len) != 0;
			n = snprintf(b, sizeof b, "v%u", i);
			bad += strtab_find(&t, b, (size_t)n) != STRTAB_NONE;
		}
		T_ASSERT(bad == 0);
		T_ASSERT(strtab_count(&t) == 100000 && strtab_id_end(&t) == 100000);
		/* at most half full */
		T_ASSERT((size_t)t.mask + 1 >= 2 * (size_t)strtab_count(&t));
		strtab_free(&t);
	}
	T_DONE();
}
