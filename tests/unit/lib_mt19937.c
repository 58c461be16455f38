/* lib_mt19937.c - the two seedings of MT19937 against their references: init_genrand (numpy's
 * RandomState(int); check values from numpy, RandomState(1234)'s first outputs) and
 * init_by_array (CPython's random.seed(int): the words of random.getstate() printed by
 * CPython 3 for seeds 0, 1234 and 2^40 + 5, a two-word key). */
#include "t.h"
#include "mt19937.h"

static int by_array(uint64_t seed, uint32_t w1, uint32_t w2, uint32_t w623)
{
	struct mt19937 mt;
	uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
	mt_seed_by_array(&mt, key, key[1] ? 2 : 1);
	return mt.key[0] == 0x80000000U && mt.key[1] == w1 && mt.key[2] == w2 &&
	       mt.key[623] == w623 && mt.pos == MT_N;
}

int main(void)
{
	T_CASE("init_genrand_is_numpys_randomstate") {
		struct mt19937 mt;
		mt_seed(&mt, 1234);
		T_ASSERT(mt_next32(&mt) == 822569775U);
		T_ASSERT(mt_next32(&mt) == 2137449171U);
	}
	T_CASE("init_by_array_is_pythons_random_seed") {
		T_ASSERT(by_array(0, 766982754U, 497961170U, 2902720905U));
		T_ASSERT(by_array(1234, 681931688U, 3687344416U, 343805460U));
		T_ASSERT(by_array(((uint64_t)1 << 40) + 5, 550267540U, 1323789645U, 2187275131U));
	}
	T_DONE();
}
