"""The .pt files tests/cli/ckpt-pt.sh reads with lmtk's reader, written by the real torch.save,
and Python's own view of each, in the form `build/tests/ckpt_pt dump` prints.

  pt-cases.py write DIR          values.pt, megatron.pt and the bad files (see bad())
  pt-cases.py expect FILE.pt     the JSON Python's torch.load sees in FILE.pt

The expected form: ints as JSON numbers, floats as their IEEE bits ({"float": hex}), bytes as
hex, tuples {"tuple": [...]}, dicts {"dict": [[k, v], ...]} in order, a class kept as a plain
value {"cls": name, "value": ...}, tensors with dtype, shape, strides, storage offset, storage
key (torch.save numbers storages "0", "1" ... in order of first appearance, which is the order
of this walk), the storage's numel, and the elements both raw and as float32, bit for bit.
"""
import argparse
import collections
import dataclasses
import json
import math
import os
import pickletools
import random
import struct
import sys
import types
import zipfile

import numpy as np
import torch


# DeepSpeed's bf16 optimizer saves param_slice_mappings of this dataclass
# (deepspeed/utils/tensor_fragment.py); DeepSpeed is not installed, so the class is declared
# under its module's name for pickle to find, as torch.save would write the real one.
_ds = types.ModuleType("deepspeed.utils.tensor_fragment")
sys.modules.setdefault("deepspeed", types.ModuleType("deepspeed"))
sys.modules.setdefault("deepspeed.utils", types.ModuleType("deepspeed.utils"))
sys.modules["deepspeed.utils.tensor_fragment"] = _ds


@dataclasses.dataclass
class fragment_address:
    numel: int
    start: int


fragment_address.__module__ = _ds.__name__
_ds.fragment_address = fragment_address


def values():
    g = torch.Generator().manual_seed(17)
    big = torch.randn(64, generator=g)
    base = torch.randn(6, 8, generator=g)
    tens = collections.OrderedDict()
    for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        t = (torch.randn(40, generator=g) * 1000).to(dt)
        tens[str(dt)] = t[5:29].view(4, 6)           # non-zero storage offset
        tens[str(dt) + ".T"] = t[5:29].view(4, 6).t()  # transposed view of the same storage
    for dt in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        info = torch.iinfo(dt)
        t = torch.randint(info.min, info.max, (30,), generator=g, dtype=torch.int64).to(dt)
        t[0], t[1] = info.min, info.max
        tens[str(dt)] = t[1:].view(29)[2:][::3]        # offset 3, stride 3
    tens["bool"] = torch.rand(20, generator=g) > 0.5
    tens["int64_beyond_2^24"] = torch.tensor([2**24 + 1, 2**53 + 1, -(2**62) - 1, 2**63 - 1])
    tens["f16_subnormal_inf_nan"] = torch.tensor([6e-8, 6.1e-5, -65504, math.inf, math.nan], dtype=torch.float16)
    tens["slice_step"] = base[1:5, ::2]
    tens["slice_block"] = base[2:, 3:6]
    tens["same_storage_again"] = base                   # a third view of base's storage
    tens["same_tensor_twice"] = tens["slice_step"]      # memoized: one object
    tens["scalar"] = torch.tensor(3.25)
    tens["empty"] = torch.zeros(0, 5)
    tens["expanded"] = torch.arange(4.0).view(4, 1).expand(4, 3)   # stride 0
    tens["narrow_of_big"] = big[60:]
    p = torch.nn.Parameter(torch.randn(3, 2, generator=g).to(torch.bfloat16))
    many = {i: i * i for i in range(1500)}                # SETITEMS in batches of 1000, LONG_BINPUT
    strs = ["s%d" % i for i in range(300)]
    return {
        "tensors": tens,
        "param": p,
        "args": argparse.Namespace(num_layers=2, hidden_size=64, params_dtype=torch.bfloat16,
                                   lr=6e-5, seq_length=2048, data_path=["1.0", "a/b"],
                                   tokenizer_type="PretrainedFromHF", fp16=False, bf16=True,
                                   rampup_batch_size=None, extra={"k": (1, 2.5)}),
        "ints": [0, 1, -1, 255, 256, 65535, 65536, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1,
                 2**32, 2**62, 2**63 - 1, -(2**63)],
        "floats": [0.0, -0.0, 1.5, 1e-300, 5e-324, math.inf, -math.inf, math.nan, 6e-5, 1 / 3],
        "strs": ["", "ascii", "h\u00e9llo \u2713 \U0001f600", 'quote " back \\ nl \n tab \t'],
        "bytes": [b"", b"\x00\xff\x80abc", bytes(range(256))],
        "none": None, "true": True, "false": False,
        7: "an int key", -3: {0: {"step": 10}},
        "nested": {"a": [1, (2, [3, {"b": ()}]), []], "t1": (1,), "t2": (1, 2), "t3": (1, 2, 3)},
        "size": torch.Size([4, 1024]),
        "dtypes": [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64,
                   torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool],
        "np_rng": np.random.RandomState(5).get_state(),
        "np_scalars": [np.float32(1.5), np.int64(-7), np.float64(0.1)],
        "np_arrays": [np.arange(6, dtype=np.float32).reshape(2, 3), np.array([True, False]),
                      np.zeros((0,), dtype=np.int16)],
        "torch_rng": torch.get_rng_state(),
        "set": {3, 1, 2},
        "many": many,
        "strs300": strs,
        "one": [5],
        "param_slice_mappings": [collections.OrderedDict([
            ("word_embeddings.weight", fragment_address(numel=800, start=0)),
            ("input_layernorm.weight", fragment_address(numel=16, start=800))])],
    }


def megatron():
    """The shape of Megatron-DeepSpeed's mp_rank_XX_model_states.pt (megatron/checkpointing.py)."""
    g = torch.Generator().manual_seed(3)
    random.seed(11)
    np.random.seed(12)
    torch.manual_seed(13)
    emb = torch.randn(50, 16, generator=g).to(torch.bfloat16)
    lm = collections.OrderedDict()
    lm["embedding"] = collections.OrderedDict(
        word_embeddings=collections.OrderedDict(weight=emb))
    enc = collections.OrderedDict()
    enc["layers.0.input_layernorm.weight"] = torch.ones(16, dtype=torch.bfloat16)
    enc["layers.0.self_attention.query_key_value.weight"] = torch.randn(48, 16, generator=g).to(torch.bfloat16)
    lm["encoder"] = enc
    return {
        "args": argparse.Namespace(tensor_model_parallel_size=2, pipeline_model_parallel_size=1,
                                   params_dtype=torch.bfloat16, iteration=100, consumed_train_samples=3200,
                                   rampup_batch_size=["32", "32", "2_000_000"]),
        "checkpoint_version": 3.0,
        "iteration": 100,
        "model": {"language_model": lm},
        "rng_state": [{
            "random_rng_state": random.getstate(),
            "np_rng_state": np.random.get_state(),
            "torch_rng_state": torch.get_rng_state(),
            "cuda_rng_state": torch.zeros(16, dtype=torch.uint8),
            "rng_tracker_states": {"model-parallel-rng": torch.zeros(16, dtype=torch.uint8)},
        }],
        "tokens": 3200 * 2048,
    }


class Custom:
    def __init__(self):
        self.x = 1


class Evil:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, ("touch " + self.path,))


def rezip(src, dst, edit=lambda b: b, drop=()):
    """dst: src's entries, stored, data.pkl passed through edit(), entries ending in drop left out"""
    with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zo:
        for info in zi.infolist():
            if info.filename.endswith(tuple(drop)):
                continue
            b = zi.read(info.filename)
            zo.writestr(info.filename, edit(b) if info.filename.endswith("/data.pkl") else b)


def overrun(pkl):
    """the first tensor's storage offset (the opcode after the first BINPERSID) made 250"""
    ops = list(pickletools.genops(pkl))
    for i, (op, arg, pos) in enumerate(ops):
        if op.name == "BINPERSID":
            nop, narg, npos = ops[i + 1]
            assert nop.name == "BININT1", nop.name
            return pkl[:npos + 1] + bytes([250]) + pkl[npos + 2:]
    raise SystemExit("no BINPERSID")


def write(d):
    torch.save(values(), os.path.join(d, "values.pt"))
    torch.save(megatron(), os.path.join(d, "megatron.pt"))
    w = torch.arange(12.0)
    small = {"w": w[2:6], "n": 1}
    torch.save(small, os.path.join(d, "small.pt"))
    torch.save(small, os.path.join(d, "legacy.pt"), _use_new_zipfile_serialization=False)
    torch.save({"c": Custom()}, os.path.join(d, "custom.pt"))
    torch.save({"e": Evil(os.path.join(d, "pwned"))}, os.path.join(d, "evil.pt"))
    torch.save(small, os.path.join(d, "proto4.pt"), pickle_protocol=4)
    torch.save({"huge": 2**70}, os.path.join(d, "huge.pt"))
    torch.save({"w": w.to(torch.float32).view(3, 4)}, os.path.join(d, "big-endian.pt"))
    rezip(os.path.join(d, "small.pt"), os.path.join(d, "overrun.pt"), overrun)
    rezip(os.path.join(d, "small.pt"), os.path.join(d, "nostorage.pt"), drop=("/data/0",))
    # the byteorder record says big (torch.save on a big-endian machine)
    with zipfile.ZipFile(os.path.join(d, "big-endian.pt")) as zi:
        names = zi.namelist()
        arch = names[0].split("/")[0]
        with zipfile.ZipFile(os.path.join(d, "big-endian2.pt"), "w", zipfile.ZIP_STORED) as zo:
            for n in names:
                if not n.endswith("/byteorder"):
                    zo.writestr(n, zi.read(n))
            zo.writestr(arch + "/byteorder", "big")
    os.replace(os.path.join(d, "big-endian2.pt"), os.path.join(d, "big-endian.pt"))
    # values.pt must exercise what the reader claims: check the opcodes torch.save used
    with zipfile.ZipFile(os.path.join(d, "values.pt")) as z:
        pkl = z.read([n for n in z.namelist() if n.endswith("/data.pkl")][0])
    used = {op.name for op, _, _ in pickletools.genops(pkl)}
    need = {"LONG_BINPUT", "LONG_BINGET", "SETITEMS", "SETITEM", "APPENDS", "APPEND", "LONG1",
            "BININT", "BININT2", "BINFLOAT", "NEWOBJ", "BUILD", "BINPERSID", "TUPLE", "TUPLE1",
            "TUPLE2", "TUPLE3", "EMPTY_TUPLE", "NEWTRUE", "NEWFALSE", "NONE"}
    if need - used:
        raise SystemExit("values.pt lacks opcodes %s" % sorted(need - used))


def f64bits(x):
    return "%016x" % struct.unpack("<Q", struct.pack("<d", x))[0]


class Expect:
    def __init__(self):
        self.keys = {}

    def tensor(self, t):
        t = t.detach()
        st = t.storage()
        key = self.keys.setdefault(st.data_ptr(), str(len(self.keys)))
        flat = t.clone().contiguous().reshape(-1)
        raw = (flat.view(torch.uint8) if flat.dtype != torch.bool else flat.to(torch.uint8))
        return {"tensor": {
            "dtype": str(t.dtype).split(".")[1], "shape": list(t.shape), "stride": list(t.stride()),
            "offset": t.storage_offset(), "storage": key, "storage_numel": st.size(),
            "location": "cpu", "data": raw.numpy().tobytes().hex(),
            "f32": flat.float().numpy().tobytes().hex()}}

    def __call__(self, o):
        if isinstance(o, torch.nn.Parameter):
            return {"cls": "torch.nn.Parameter", "value": self.tensor(o.data)}
        if isinstance(o, torch.Tensor):
            return self.tensor(o)
        if isinstance(o, (np.ndarray, np.generic)):     # before float: np.float64 is one
            a = np.asarray(o)
            return {"ndarray": {"dtype": a.dtype.str, "shape": list(a.shape),
                                "data": a.tobytes().hex()}}
        if o is None or isinstance(o, (bool, str)):
            return o
        if isinstance(o, int):
            return o
        if isinstance(o, float):
            return {"float": f64bits(o)}
        if isinstance(o, bytes):
            return {"bytes": o.hex()}
        if isinstance(o, torch.Size):
            return {"cls": "torch.Size", "value": {"tuple": list(o)}}
        if isinstance(o, tuple):
            return {"tuple": [self(x) for x in o]}
        if isinstance(o, list):
            return [self(x) for x in o]
        if isinstance(o, set):
            return {"cls": "set", "value": [self(x) for x in o]}
        if isinstance(o, collections.OrderedDict):
            return {"cls": "collections.OrderedDict",
                    "value": {"dict": [[self(k), self(v)] for k, v in o.items()]}}
        if isinstance(o, dict):
            return {"dict": [[self(k), self(v)] for k, v in o.items()]}
        if isinstance(o, argparse.Namespace):
            return {"cls": "argparse.Namespace",
                    "value": {"dict": [[k, self(v)] for k, v in vars(o).items()]}}
        if isinstance(o, fragment_address):
            return {"cls": "deepspeed.utils.tensor_fragment.fragment_address",
                    "value": {"dict": [[k, self(v)] for k, v in vars(o).items()]}}
        if isinstance(o, torch.dtype):
            return {"dtype": str(o).split(".")[1]}
        raise SystemExit("no expected form for %r" % type(o))


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2])
    elif sys.argv[1] == "expect":
        print(json.dumps(Expect()(torch.load(sys.argv[2])), sort_keys=True))
    else:
        raise SystemExit("usage: pt-cases.py write DIR | expect FILE.pt")
