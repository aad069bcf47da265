import numpy as np
rng = np.random.default_rng(0)
dump = {}
for layer in (3, 4):
    p = rng.permutation(1 / np.arange(1, 257) ** 0.6)
    p /= p.sum()
    dump[f"layers.{layer}.topk_idx"] = np.stack(
        [rng.choice(256, 8, replace=False, p=p) for _ in range(2048)])
np.savez("routing.npz", **dump)
