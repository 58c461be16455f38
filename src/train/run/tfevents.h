/* tfevents - TensorBoard event files written natively, without TensorFlow or a protobuf library.
 *
 * An event file is a sequence of records, each `u64 length | u32 masked_crc32c(length bytes) |
 * data | u32 masked_crc32c(data)` (little-endian), whose data is one serialized Event protobuf.
 * The first Event carries file_version "brain.Event:2"; every later one a Summary holding one
 * Value.  We only ever write three shapes of Event, so instead of a general protobuf encoder the
 * module has a handful of field writers and, per shape, the nested message sizes computed inside
 * out before the single forward pass that emits the bytes.  Fields go out in field-number order
 * and proto3 defaults (step 0) are left out, as protobuf's own serializers do, so a payload is
 * byte for byte what protobuf makes of the same Event (the spec's worked bytes are one).
 *
 * Scalars use Value.simple_value (a float32): every TensorBoard version reads it, and the
 * EventAccumulator files it under Scalars.  Text uses the text plugin's form, a Value with
 * metadata.plugin_data.plugin_name = "text" and a rank-0 DT_STRING tensor; field numbers are
 * tensorboard/compat/proto/{summary,tensor,tensor_shape,types}.proto's.
 *
 * Crash safety comes from the framing, not from buffering: each record is framed in memory and
 * handed to the kernel with one write(2), so a killed trainer leaves at most a truncated last
 * record, which TensorBoard's reader skips.  If a write fails half way (disk full) the file is cut
 * back to its last whole record, so later records never land after garbage.  The records are
 * visible to readers (and to hub-sync) as soon as the call returns; tfevents_flush() only adds an
 * fsync for durability across a power cut.
 *
 * The file is created with O_EXCL under TensorFlow's name, events.out.tfevents.SECONDS.HOST;
 * should that name be taken (two writers in the same second), ".1", ".2", ... is appended, which
 * still sorts after the plain name, the order readers load files in.  A writer is not thread
 * safe; one per process is the intended use. */
#ifndef TRAIN_TFEVENTS_H
#define TRAIN_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>

struct tfevents;

/* mkdir -p dir, create a new event file in it and write the file_version record.  NULL with err
 * naming the path on failure. */
struct tfevents *tfevents_open(const char *dir, char *err, size_t errlen);

/* One record each; wall_time is the current time.  0, or -1 with tfevents_error() set. */
int tfevents_scalar(struct tfevents *w, const char *tag, int64_t step, double value);
int tfevents_text(struct tfevents *w, const char *tag, int64_t step, const char *text);

/* fsync: the records already written survive a power cut.  0 or -1. */
int tfevents_flush(struct tfevents *w);
/* fsync and close; NULL is fine.  Errors here are not reported: every record was already
 * handed to the kernel, and a failed fsync at exit has nobody left to tell. */
void tfevents_close(struct tfevents *w);

/* The last error, naming the file and the errno text; "" if none. */
const char *tfevents_error(const struct tfevents *w);
/* The file's path. */
const char *tfevents_path(const struct tfevents *w);

/* CRC-32C (Castagnoli): crc32c("123456789") = 0xE3069283.  The masked form is what a record
 * stores, ((crc >> 15) | (crc << 17)) + 0xA282EAD8, so that a CRC over data that itself
 * contains CRCs does not degenerate. */
uint32_t tfevents_crc32c(const void *p, size_t n);
uint32_t tfevents_masked_crc32c(const void *p, size_t n);

/* The Event payload (not framed) of a scalar, for tests.  Like snprintf, returns the length the
 * encoding needs and writes it only if it fits in cap. */
size_t tfevents_encode_scalar(uint8_t *buf, size_t cap, double wall_time, int64_t step,
			      const char *tag, float value);

#endif
