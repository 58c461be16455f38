/* manifest - see manifest.h. */
#include "ckpt/manifest.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "msg.h"

#define DAMAGED "the manifest is damaged or was edited; refusing to load it"

/* The value at a dotted path ("scheduler.num_steps"), or NULL */
static json_t *at(json_t *man, const char *path)
{
	char buf[128], *save = NULL;
	snprintf(buf, sizeof buf, "%s", path);
	json_t *o = man;
	for (char *k = strtok_r(buf, ".", &save); k && o; k = strtok_r(NULL, ".", &save))
		o = json_object_get(o, k);
	return o;
}

/* A count: absent (0, *v = def) or a whole number in [0, 2^53].  -1 + err otherwise. */
static int count(json_t *man, const char *path, const char *field, int64_t def, int64_t *v,
		 char *err, size_t errlen)
{
	json_t *x = at(man, field);
	*v = def;
	if (!x)
		return 0;
	if (json_is_real(x)) {
		double d = json_real_value(x);
		return errf(err, errlen, "%s: \"%s\" is %g, not a whole number: " DAMAGED, path, field, d);
	}
	if (!json_is_integer(x))
		return errf(err, errlen, "%s: \"%s\" is not a number: " DAMAGED, path, field);
	*v = json_integer_value(x);
	if (*v < 0)
		return errf(err, errlen, "%s: \"%s\" is %lld, below 0: " DAMAGED, path, field,
			    (long long)*v);
	if (*v > MANIFEST_COUNT_MAX)
		return errf(err, errlen, "%s: \"%s\" is %lld, above 2^53: " DAMAGED, path, field,
			    (long long)*v);
	return 0;
}

/* A real: absent, or finite, >= 0 (> 0 when positive) */
static int real(json_t *man, const char *path, const char *field, int positive, char *err,
		size_t errlen)
{
	json_t *x = at(man, field);
	if (!x)
		return 0;
	if (!json_is_number(x))
		return errf(err, errlen, "%s: \"%s\" is not a number: " DAMAGED, path, field);
	double d = json_number_value(x);
	if (!isfinite(d) || d < 0 || (positive && d == 0))
		return errf(err, errlen, "%s: \"%s\" is %g, not a %s number: " DAMAGED, path, field, d,
			    positive ? "finite positive" : "finite, non-negative");
	return 0;
}

int manifest_check(json_t *man, const char *path, char *err, size_t errlen)
{
	static const char *const counts[] = {
		"consumed_tokens", "skip_ranges_done_through", "loss_spikes",
		"scheduler.warmup", "scheduler.decay", "scheduler.num_steps", "scheduler.num_tokens",
		"scheduler.warmup_tokens", "optimizer.step", "optimizer.good_steps",
		"loss_tracker.count",
	};
	int64_t it, samples, position, skipped, nan, tp, pp, v;
	if (!json_is_object(man))
		return errf(err, errlen, "%s: not a JSON object: " DAMAGED, path);
	if (count(man, path, "iteration", 0, &it, err, errlen) ||
	    count(man, path, "consumed_samples", 0, &samples, err, errlen) ||
	    count(man, path, "data_position", samples, &position, err, errlen) ||
	    count(man, path, "skipped_iterations", 0, &skipped, err, errlen) ||
	    count(man, path, "nan_iterations", 0, &nan, err, errlen))
		return -1;
	for (size_t i = 0; i < sizeof counts / sizeof *counts; i++)
		if (count(man, path, counts[i], 0, &v, err, errlen))
			return -1;
	/* Megatron's hysteresis tracker counts down on every overflow and is reset only by a window
	 * of good steps, so a streak of overflows takes it below 0: any int a run could reach
	 * (|v| <= 2^30: a billion overflowing steps) */
	json_t *h = at(man, "optimizer.hysteresis_left");
	if (h && (!json_is_integer(h) || json_integer_value(h) < -(1 << 30) ||
		  json_integer_value(h) > (1 << 30)))
		return errf(err, errlen, "%s: \"optimizer.hysteresis_left\" is not a whole number in "
			    "-2^30..2^30: " DAMAGED, path);
	if (samples > position)
		return errf(err, errlen, "%s: \"consumed_samples\" %lld is past \"data_position\" %lld "
			    "(every sample consumed was drawn): " DAMAGED, path, (long long)samples,
			    (long long)position);
	if (skipped > it || nan > skipped)
		return errf(err, errlen, "%s: %lld skipped and %lld nan iterations at iteration %lld: "
			    DAMAGED, path, (long long)skipped, (long long)nan, (long long)it);
	if (count(man, path, "layout.tp", 1, &tp, err, errlen) ||
	    count(man, path, "layout.pp", 1, &pp, err, errlen))
		return -1;
	if (tp < 1 || tp > 65536 || pp < 1 || pp > 65536)
		return errf(err, errlen, "%s: layout TP=%lld PP=%lld, outside 1..65536: " DAMAGED, path,
			    (long long)tp, (long long)pp);
	if (real(man, path, "scheduler.max_lr", 0, err, errlen) ||
	    real(man, path, "scheduler.min_lr", 0, err, errlen) ||
	    real(man, path, "optimizer.loss_scale", 1, err, errlen))
		return -1;
	json_t *lt = at(man, "loss_tracker.mean");
	if (lt && (!json_is_number(lt) || !isfinite(json_number_value(lt))))
		return errf(err, errlen, "%s: \"loss_tracker.mean\" is not a finite number: " DAMAGED,
			    path);
	json_t *vp = json_object_get(man, "valid_positions");
	if (vp && !json_is_array(vp))
		return errf(err, errlen, "%s: \"valid_positions\" is not a list: " DAMAGED, path);
	for (size_t i = 0; vp && i < json_array_size(vp); i++) {
		json_t *x = json_array_get(vp, i);
		if (!json_is_integer(x) || json_integer_value(x) < 0 ||
		    json_integer_value(x) > MANIFEST_COUNT_MAX)
			return errf(err, errlen, "%s: \"valid_positions\"[%zu] is not a count of samples: "
				    DAMAGED, path, i);
	}
	return 0;
}
