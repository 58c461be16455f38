#!/usr/bin/python3
"""tfevents-read.py - an independent reader of TensorBoard event files, for tests.  Written from
the format's definitions (shared/spec/tfevents-lfs-hub.md; tensorboard/compat/proto/event.proto,
summary.proto, tensor.proto), standard library only, sharing no code with src/train/run/tfevents.c:
its CRC-32C is computed from the polynomial here and the protobuf wire format is decoded by hand.

  tfevents-read.py [--json] DIR|FILE...

Reads every file with "tfevents" in its name in each DIR, in name order (TensorBoard's order), or
the FILEs as given.  Checks both masked CRC-32Cs of every record and that each file starts with a
file_version "brain.Event:..." event.  Prints, in file and record order:
  TAG<TAB>STEP<TAB>VALUE            a simple_value scalar; VALUE is repr() of the float32, exact
  TEXT<TAB>TAG<TAB>STEP<TAB>TEXT    a text-plugin summary (DT_STRING tensor); backslash, tab,
                                    newline and CR in TEXT are written \\\\, \\t, \\n, \\r
--json prints one JSON list instead, objects {"file", "wall_time", "step", "tag", "kind":
"scalar", "value"} or {..., "kind": "text", "text"}; a text tensor with several strings gives
one line or object per string.

A file ending inside a record (a writer killed mid-write) is reported on stderr and its whole
records are used.  Exit 0; 1 on a CRC mismatch in a complete record or a malformed file (bad
varint, a field running past its message, a wire type other than 0, 1, 2, 5, no file_version
first), or when no event file was found; 2 on a usage error.  An empty file (created, nothing
written yet) is reported and skipped like a truncated record.
"""
import json
import os
import struct
import sys

PROG = "tfevents-read"


class Bad(Exception):
    """A malformed file or a CRC mismatch: exit 1."""


def _crc_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC_TABLE = _crc_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283


def records(path, data):
    """Yields (offset, payload) of every whole record; reports a truncated last one."""
    off = 0
    while off < len(data):
        left = len(data) - off
        if left < 12:
            warn(f"{path}: truncated last record at byte {off} ({left} of a 12-byte header),"
                 " ignored")
            return
        length, hcrc = struct.unpack_from("<QI", data, off)
        if masked(data[off:off + 8]) != hcrc:
            raise Bad(f"{path}: record at byte {off}: length CRC mismatch")
        need = 12 + length + 4
        if left < need:
            warn(f"{path}: truncated last record at byte {off} ({left} of {need} bytes), ignored")
            return
        payload = data[off + 12:off + 12 + length]
        (dcrc,) = struct.unpack_from("<I", data, off + 12 + length)
        if masked(payload) != dcrc:
            raise Bad(f"{path}: record at byte {off}: data CRC mismatch")
        yield off, payload
        off += 12 + length + 4


def varint(buf, i):
    v = shift = 0
    for _ in range(10):
        if i >= len(buf):
            raise Bad("varint runs past the end of its message")
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i
    raise Bad("varint longer than 10 bytes")


def fields(buf):
    """Decodes one message into a list of (field number, wire type, value): an int for varints,
    8 or 4 raw bytes for fixed64/fixed32, bytes for length-delimited."""
    out = []
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise Bad("field number 0")
        if wire == 0:
            v, i = varint(buf, i)
        elif wire == 1 or wire == 5:
            n = 8 if wire == 1 else 4
            if i + n > len(buf):
                raise Bad(f"field {field}: fixed{n * 8} runs past the end of its message")
            v, i = buf[i:i + n], i + n
        elif wire == 2:
            n, i = varint(buf, i)
            if i + n > len(buf):
                raise Bad(f"field {field}: {n} bytes run past the end of its message")
            v, i = buf[i:i + n], i + n
        else:
            raise Bad(f"field {field}: wire type {wire}")
        out.append((field, wire, v))
    return out


def one(fs, field, wire):
    """The last occurrence of a singular field (protobuf's rule), or None."""
    v = None
    for f, w, x in fs:
        if f == field:
            if w != wire:
                raise Bad(f"field {field}: wire type {w}, expected {wire}")
            v = x
    return v


def many(fs, field, wire):
    out = []
    for f, w, x in fs:
        if f == field:
            if w != wire:
                raise Bad(f"field {field}: wire type {w}, expected {wire}")
            out.append(x)
    return out


def int64(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def event_items(path, payload, first):
    """Decodes an Event (event.proto: wall_time 1, step 2, file_version 3, summary 5) into the
    scalars and texts it holds."""
    ev = fields(payload)
    raw = one(ev, 1, 1)
    wall = struct.unpack("<d", raw)[0] if raw is not None else 0.0
    step = int64(one(ev, 2, 0) or 0)
    version = one(ev, 3, 2)
    if first and (version is None or not version.startswith(b"brain.Event:")):
        raise Bad("the first record is not a file_version \"brain.Event:...\" event")
    summary = one(ev, 5, 2)
    if summary is None:
        return
    # Summary: value 1 (repeated).  Value: tag 1, simple_value 2 (float), tensor 8, metadata 9.
    for value in many(fields(summary), 1, 2):
        vf = fields(value)
        tag = (one(vf, 1, 2) or b"").decode("utf-8", "replace")
        base = {"file": path, "wall_time": wall, "step": step, "tag": tag}
        simple = one(vf, 2, 5)
        if simple is not None:
            yield dict(base, kind="scalar", value=struct.unpack("<f", simple)[0])
            continue
        meta, tensor = one(vf, 9, 2), one(vf, 8, 2)
        if meta is None or tensor is None:
            continue
        # SummaryMetadata: plugin_data 1 > PluginData: plugin_name 1.
        plugin = one(fields(meta), 1, 2)
        name = one(fields(plugin), 1, 2) if plugin is not None else None
        if name != b"text":
            continue
        # TensorProto: dtype 1 (DT_STRING = 7), tensor_shape 2, string_val 8 (repeated).
        tf = fields(tensor)
        if one(tf, 1, 0) != 7:
            raise Bad(f"text summary {tag!r} at step {step}: tensor dtype is not DT_STRING")
        for s in many(tf, 8, 2):
            yield dict(base, kind="text", text=s.decode("utf-8", "replace"))


def read_file(path):
    with open(path, "rb") as f:
        data = f.read()
    items = []
    if not data:
        warn(f"{path}: empty file (a writer that died before its first record), ignored")
    for n, (off, payload) in enumerate(records(path, data)):
        try:
            items.extend(event_items(path, payload, n == 0))
        except Bad as e:
            raise Bad(f"{path}: record at byte {off}: {e}") from None
    return items


def warn(msg):
    print(f"{PROG}: {msg}", file=sys.stderr)


def escape(s):
    return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def main(argv):
    as_json = False
    args = []
    for a in argv:
        if a == "--json":
            as_json = True
        elif a.startswith("-") and a != "-":
            print(f"usage: {PROG} [--json] DIR|FILE...", file=sys.stderr)
            return 2
        else:
            args.append(a)
    if not args:
        print(f"usage: {PROG} [--json] DIR|FILE...", file=sys.stderr)
        return 2
    paths = []
    for a in args:
        if os.path.isdir(a):
            paths += [os.path.join(a, n) for n in sorted(os.listdir(a)) if "tfevents" in n]
        else:
            paths.append(a)
    if not paths:
        warn(f"{' '.join(args)}: no event files")
        return 1
    items = []
    try:
        for p in paths:
            items += read_file(p)
    except OSError as e:
        warn(f"{e.filename}: {e.strerror}")
        return 1
    except Bad as e:
        warn(str(e))
        return 1
    if as_json:
        json.dump(items, sys.stdout, indent=1)
        print()
        return 0
    for it in items:
        if it["kind"] == "scalar":
            print(f"{it['tag']}\t{it['step']}\t{it['value']!r}")
        else:
            print(f"TEXT\t{it['tag']}\t{it['step']}\t{escape(it['text'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
