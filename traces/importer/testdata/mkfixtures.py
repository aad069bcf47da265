#!/usr/bin/env python3
"""Write the importer's test fixtures with NumPy (run from this directory).

    python3 mkfixtures.py

Needs only NumPy (Debian: python3-numpy). Debian does not package the
safetensors library, so routing.safetensors is written here from the
format's documented layout: an 8-byte little-endian header length N, N bytes
of JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}} padded with
spaces, then the little-endian tensor bytes (offsets relative to the data).
expected.json lists every tensor's shape and values in C order, as NumPy
sees them, for the Go tests to compare against.
"""
import json
import struct

import numpy as np

E, K, T = 16, 4, 12  # experts, top-k, tokens per layer
rng = np.random.default_rng(7)


def routing(tokens, mask=True):
    """tokens x K distinct experts per row, a few masked with -1."""
    idx = np.stack([rng.permutation(E)[:K] for _ in range(tokens)]).astype(np.int64)
    if mask and tokens > 5:
        idx[1, 2] = -1
        idx[5, 0] = -1
    return idx


def weights(idx):
    w = rng.random(idx.shape)
    w[idx < 0] = 0
    return w / w.sum(axis=1, keepdims=True)


expected = {}


def note(file, name, arr):
    a = np.asarray(arr)
    vals = a.ravel(order="C")
    vals = [int(v) for v in vals] if a.dtype.kind in "iu" else [float(v) for v in vals]
    expected.setdefault(file, {})[name] = {"dtype": str(a.dtype), "shape": list(a.shape), "values": vals}


# 1. A stacked [layers, tokens, top_k] int64 tensor, little endian, C order.
stack = np.stack([routing(T), routing(T)])
np.save("topk_idx.npy", stack)
note("topk_idx.npy", "topk_idx", stack)

# 2. One layer as int32 big endian, weights as float32, in .npy format 2.0.
l3 = routing(T).astype(">i4")
w3 = weights(l3).astype("<f4")
with open("layers.3.topk_idx.npy", "wb") as f:
    np.lib.format.write_array(f, l3, version=(2, 0))
np.save("layers.3.topk_weights.npy", w3)
note("layers.3.topk_idx.npy", "layers.3.topk_idx", l3)
note("layers.3.topk_weights.npy", "layers.3.topk_weights", w3)

# 3. Fortran order, unsigned bytes (no masking possible).
fo = np.asfortranarray(routing(T, mask=False).astype(np.uint8))
assert fo.flags.f_contiguous and not fo.flags.c_contiguous
np.save("layer4_fortran_topk_ids.npy", fo)
note("layer4_fortran_topk_ids.npy", "layer4_fortran_topk_ids", fo)

# 4. An uncompressed .npz: two layers, int16 big endian and uint32, with
#    float16 weights for layer 3.
a3, a4 = routing(T).astype(">i2"), routing(T, mask=False).astype("<u4")
wa3 = weights(a3).astype(np.float16)
np.savez("routing.npz", **{"layers.3.topk_idx": a3, "layers.3.topk_weights": wa3, "layers.4.topk_idx": a4})
note("routing.npz", "layers.3.topk_idx", a3)
note("routing.npz", "layers.3.topk_weights", wa3)
note("routing.npz", "layers.4.topk_idx", a4)

# 5. A compressed .npz of per-rank tensors (DeepEP's per-rank topk_idx):
#    2 ranks, uneven token counts, Fortran-order int64 for rank 1.
r0, r1 = routing(5), np.asfortranarray(routing(7))
np.savez_compressed("ranks.npz", **{"rank0.layers.3.topk_idx": r0, "rank1.layers.3.topk_idx": r1})
note("ranks.npz", "rank0.layers.3.topk_idx", r0)
note("ranks.npz", "rank1.layers.3.topk_idx", r1)


# 6. safetensors: int64 indices and float32 weights for layers 3 and 4.
def save_safetensors(path, tensors):
    codes = {np.dtype("<i8"): "I64", np.dtype("<i4"): "I32", np.dtype("<f4"): "F32", np.dtype("<u2"): "U16"}
    header, blobs, off = {"__metadata__": {"format": "np"}}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        b = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": codes[a.dtype.newbyteorder("<")], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


s3, s4 = routing(T), routing(T).astype("<i4")
ws3 = weights(s3).astype("<f4")
sw = {"model.layers.3.mlp.gate.topk_idx": s3, "model.layers.3.mlp.gate.topk_weights": ws3,
      "model.layers.4.mlp.gate.topk_idx": s4}
save_safetensors("routing.safetensors", sw)
for n, a in sw.items():
    note("routing.safetensors", n, a)

# 7. CSV: layer and rank columns, weights.
with open("routing.csv", "w") as f:
    f.write("layer,rank," + ",".join(f"topk_idx_{j}" for j in range(K)) + "," +
            ",".join(f"topk_weights_{j}" for j in range(K)) + "\n")
    for rank, idx in enumerate([routing(3), routing(4)]):
        w = weights(idx)
        for row, wr in zip(idx, w):
            f.write(f"3,{rank}," + ",".join(str(int(v)) for v in row) + "," + ",".join(repr(float(x)) for x in wr) + "\n")

# Bad inputs for the error tests.
bad = routing(T)
bad[7, 3] = 300
np.save("bad_range_topk_idx.npy", bad)
dup = routing(T)
dup[2, 1] = dup[2, 0]
np.savez("bad_dup.npz", **{"layers.3.topk_idx": dup})
np.save("bad_float_topk_idx.npy", routing(T).astype(np.float32))
np.save("bad_shape_topk_idx.npy", routing(T).ravel())

with open("expected.json", "w") as f:
    json.dump(expected, f, indent=1, sort_keys=True)
    f.write("\n")
