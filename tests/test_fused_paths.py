"""The fused kernels (:mod:`prioritylab.samplers.fused`) against the general path, bit for bit.

Each sampler that takes the fused kernels is driven twice through the same random script of
``add`` (with links, overwrites and held items), ``set_sampleable``, ``update`` (fresh and stale
items) and ``sample``: once as it is, once with the fused kernels switched off.  After every call
the two must hold the same state and draw the same batches, and every refused call must raise the
same error and change neither.
"""

from __future__ import annotations

import numpy as np
import pytest

from prioritylab import SAMPLERS, make_sampler

# every sampler whose calls take a fused kernel, as the samplers themselves say (their ``_fusable``)
FUSED = [name for name in SAMPLERS if any(make_sampler(name, 8)._fused_calls())]
CAPACITY = 32


def general(name: str, seed: int):
    s = make_sampler(name, CAPACITY, seed=seed)
    s._fused = (False, False, False)  # the general path for every call
    return s


def assert_same(a, b, where: str) -> None:
    assert (a.size, a.num_sampleable) == (b.size, b.num_sampleable), f"{where}: size and sampleable count"
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys(), where
    for k in sa:
        va, vb = sa[k], sb[k]
        if isinstance(va, np.ndarray):
            assert va.dtype == vb.dtype and np.array_equal(va, vb, equal_nan=va.dtype.kind == "f"), f"{where}: {k}"
        else:
            assert va == vb, f"{where}: {k}"
    if getattr(a, "tree", None) is not None:
        assert np.array_equal(a.tree.arrays.tree, b.tree.arrays.tree), f"{where}: sum tree"
        assert np.array_equal(a.tree.arrays.tmin, b.tree.arrays.tmin), f"{where}: min tree"


def call(s, op, args):
    try:
        out = getattr(s, op)(*args[0], **args[1])
    except ValueError as err:
        return ("error", str(err))
    if op == "sample":
        return ("batch", out.indices.copy(), None if out.weights is None else out.weights.copy())
    return ("ok",)


def script(rng: np.random.Generator, name: str, steps: int = 120):
    """Random calls; about one in ten is invalid (a slot out of range, a NaN TD error, a link to an empty slot)."""
    written: list[int] = []
    for _ in range(steps):
        op = rng.choice(["add", "add", "flags", "update", "update", "sample"])
        bad = rng.random() < 0.1
        if op == "add" or not written:
            n = int(rng.integers(1, 5))
            idx = rng.choice(CAPACITY, n, replace=False)
            prev = np.where(rng.random(n) < 0.5, rng.choice(written, n) if written else -1, -1)
            if n > 1 and rng.random() < 0.3:
                prev[1] = idx[0]  # a link to a slot written earlier in the same call
            if bad:  # a link to a slot never written (or, when none is left, out of range)
                empty = [j for j in range(CAPACITY) if j not in written and j not in idx]
                prev[0] = empty[0] if empty else CAPACITY + 3
            kwargs = {"prev": prev}
            if rng.random() < 0.3:
                kwargs["sampleable"] = bool(rng.random() < 0.5)
            yield "add", ((idx,), kwargs)
            if not bad:
                written += [int(j) for j in idx if j not in written]
        elif op == "flags":
            idx = rng.choice(written, int(rng.integers(1, 4)))
            if bad:
                idx[0] = CAPACITY
            yield "set_sampleable", ((idx, bool(rng.random() < 0.6)), {})
        elif op == "update" and name != "uniform":
            k = int(rng.integers(1, 8))
            idx = rng.choice(written, k)
            td = rng.normal(scale=rng.choice([0.01, 1.0, 50.0]), size=k)
            if bad:
                td[-1] = np.nan
            yield "update", ((idx, td), {"generations": None})
        else:
            yield "sample", ((int(rng.integers(1, 9)),), {} if name == "uniform" else {"beta": 0.5})


@pytest.mark.parametrize("name", FUSED)
@pytest.mark.parametrize("seed", range(4))
def test_fused_calls_match_the_general_path_bit_for_bit(name, seed):
    fused, plain = make_sampler(name, CAPACITY, seed=seed), general(name, seed)
    assert any(fused._fused_calls()), f"{name} takes no fused kernel: this test would compare nothing"
    for i, (op, args) in enumerate(script(np.random.default_rng([seed, 7]), name)):
        if op == "update" and i % 3 == 0:  # stale items: stamps from before some slots were overwritten
            args = ((args[0][0], args[0][1]), {"generations": fused.generations(args[0][0]) - (i % 2)})
        a, b = call(fused, op, args), call(plain, op, args)
        same = all(np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y
                   for x, y in zip(a[1:], b[1:], strict=True))  # fmt: skip
        assert a[0] == b[0] and same, f"call {i} {op}: {a} != {b}"
        assert_same(fused, plain, f"after call {i} ({op})")
