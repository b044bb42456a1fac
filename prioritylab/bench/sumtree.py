"""Sum tree and PER-step throughput, prioritylab against peer libraries.

What one run measures, for each capacity and batch size ``k``:

* ``update``: batched priority updates per second.  Every call writes ``k``
  fresh random slots with fresh random values, taken in turn from a large
  pre-drawn pool (so no call repeats the previous call's slots, which would sit
  in cache, and drawing them is not charged to anyone).
* ``sample``: batch samples per second through each library's own sampling
  call (which draws its own uniforms).
* ``per-step``: the step a PER user feels -- sample ``k`` slots with IS
  weights, then update their priorities from fresh TD errors.

Contenders (peers are optional and skipped when not importable; install them
with the ``bench`` extra):

* ``prioritylab``: :class:`prioritylab.SumTree` without min/max tracking (the
  peers' sum trees keep no extrema either) and, as further rows, with the min
  tree the ``per`` sampler keeps (``prioritylab+min``, the default of
  :class:`SumTree`) and with both (``prioritylab+minmax``).  At batch 1 also
  ``prioritylab (jitted)``: ``tree_set`` / ``tree_sample_one`` called from a
  jitted loop, the testbed's path, which no peer offers (no ratio given).  For
  ``per-step``, ``prioritylab`` is the ``per`` sampler with its default global
  IS normalisation (it keeps the min tree) and ``prioritylab (batch IS)`` the
  one the deep agents use, normalised by the batch's largest weight (no min tree).
* ``tianshou``: ``tianshou.data.utils.segtree.SegmentTree`` (binary, numba):
  ``tree[idx] = values`` and ``get_prefix_sum_idx(u * tree.reduce())`` with
  stratified queries, one per k-th of the mass, as prioritylab's tree and cpprb
  draw them (its prioritised buffer, timed in ``per-step``, draws plain ones; the
  two run at the same speed).
* ``cpprb``: ``cpprb.PrioritizedReplayBuffer`` (C++) with one float field.  Its
  API exposes no bare tree: ``sample`` also computes IS weights and gathers the
  one field, ``update_priorities`` also computes ``(p + eps)^alpha``.
* ``numpy``: :class:`prioritylab.bench.numpy_tree.NumpySumTree`, a binary tree
  with level-by-level vectorised NumPy operations (LAP/PAL authors' style).

PER step: prioritylab's ``per`` sampler (``sample`` then ``update``), cpprb's
``sample``/``update_priorities`` and tianshou's ``PrioritizedReplayBuffer``
``sample_indices``/``get_weight``/``update_weight`` over a buffer filled with
dummy transitions.

Timing: each measurement runs one contender's call in a loop for ``seconds``
after a few untimed warm-up calls (JIT compilation, caches); the contenders of a
cell are interleaved (their order rotates every repeat) and the median over
``repeats`` is reported.  Ratios are to the fastest peer of the cell.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

import numpy as np
from numba import njit

from ..samplers import make_sampler
from ..sumtree import SumTree, tree_sample_one, tree_set
from . import OPS, PEERS, importable, record
from .numpy_tree import NumpySumTree

POOL = 2**20
"""Pre-drawn random slots / values / TD errors per capacity (cycled through)."""
JITTED_OPS = 1000
"""Single-slot operations per call of the jitted batch-1 loops."""


@dataclass
class Result:
    """One cell of the table: a contender's median rate over the repeats."""

    capacity: int
    batch: int
    op: str
    contender: str
    ours: bool
    calls_per_s: float
    items_per_s: float
    rates: list[float]
    ratio: float | None = None
    """``calls_per_s`` over the fastest peer's (None without peers or for jitted rows)."""


@dataclass
class Contender:
    """One library's way of doing one operation."""

    name: str
    op: str
    ours: bool
    make: Callable[[int], Callable[[], object]]
    """batch size -> zero-argument call doing one operation."""
    ops_per_call: int = 1
    """Operations one call makes (the jitted batch-1 loops make ``JITTED_OPS``)."""


class Pool:
    """Fresh random slots, values and TD errors, handed out in consecutive slices."""

    def __init__(self, capacity: int, rng: np.random.Generator, size: int = POOL):
        self.size = size
        self.slots = rng.integers(0, capacity, size)
        self.values = rng.random(size)
        self.td = rng.standard_normal(size)
        self.pos = 0

    def take(self, k: int) -> slice:
        if self.pos + k > self.size:
            self.pos = 0
        s = slice(self.pos, self.pos + k)
        self.pos += k
        return s


# ------------------------------------------------------------------------------------------ timing


def measure(call: Callable[[], object], seconds: float, warmup: int = 3) -> float:
    """Calls per second of ``call`` over at least ``seconds`` (after ``warmup`` untimed calls)."""
    for _ in range(warmup):
        call()
    done, chunk = 0, 1
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        for _ in range(chunk):
            call()
        done += chunk
        now = time.perf_counter()
        if now - start >= seconds:
            return done / (now - start)
        if now - t0 < 2e-3:  # grow chunks until the clock is read rarely
            chunk *= 2


# ------------------------------------------------------------------------------------- contenders


@njit(cache=True)
def _jitted_sets(tree, tmin, tmax, leaf0, slots, values):
    for i in range(slots.shape[0]):
        tree_set(tree, tmin, tmax, leaf0, slots[i], values[i])


@njit(cache=True)
def _jitted_draws(tree, leaf0, depth, rng, n):
    s = 0
    for _ in range(n):
        s += tree_sample_one(tree, leaf0, depth, rng)
    return s


TREE_VARIANTS = (
    ("prioritylab", False, False),  # like-for-like with the peers' bare sum trees
    ("prioritylab+min", True, False),  # the SumTree default, what the per sampler keeps (global IS normalisation)
    ("prioritylab+minmax", True, True),  # both extrema
)


def _prioritylab(capacity: int, pool: Pool, rng: np.random.Generator) -> list[Contender]:
    """SumTree without and with extrema, the jitted batch-1 path, and the ``per`` sampler."""
    out = []
    trees = {}
    for name, track_min, track_max in TREE_VARIANTS:
        tree = trees[name] = SumTree(capacity, track_min=track_min, track_max=track_max)
        tree.update(np.arange(capacity), rng.random(capacity))

        def update(k, tree=tree):
            return lambda: tree.update(*_pool_pair(pool, k))

        def sample(k, tree=tree):
            return lambda: tree.sample(k, rng)

        out += [Contender(name, "update", True, update), Contender(name, "sample", True, sample)]
    a = trees["prioritylab+minmax"].arrays  # the testbed's trees track extrema

    def jit_update(k):
        return lambda: _jitted_sets(a.tree, a.tmin, a.tmax, a.leaf0, *_pool_pair(pool, JITTED_OPS))

    def jit_sample(k):
        return lambda: _jitted_draws(a.tree, a.leaf0, a.depth, rng, JITTED_OPS)

    out += [
        Contender("prioritylab (jitted)", "update", True, jit_update, JITTED_OPS),
        Contender("prioritylab (jitted)", "sample", True, jit_sample, JITTED_OPS),
    ]
    for name, normalise in (("prioritylab", "global"), ("prioritylab (batch IS)", "batch")):
        per = make_sampler("per", capacity, normalise=normalise, seed=0)
        per.add(np.arange(capacity))
        per.update(np.arange(capacity), rng.standard_normal(capacity))

        def per_step(k, per=per):
            def step():
                batch = per.sample(k)
                per.update(batch.indices, pool.td[pool.take(k)])

            return step

        out.append(Contender(name, "per-step", True, per_step))
    return out


def _pool_pair(pool: Pool, k: int) -> tuple[np.ndarray, np.ndarray]:
    s = pool.take(k)
    return pool.slots[s], pool.values[s]


def _numpy(capacity: int, pool: Pool, rng: np.random.Generator) -> list[Contender]:
    tree = NumpySumTree(capacity)
    tree.update(np.arange(capacity), rng.random(capacity))
    return [
        Contender("numpy", "update", False, lambda k: lambda: tree.update(*_pool_pair(pool, k))),
        Contender("numpy", "sample", False, lambda k: lambda: tree.sample(k, rng)),
    ]


def _tianshou(capacity: int, pool: Pool, rng: np.random.Generator) -> list[Contender]:
    from tianshou.data import Batch, PrioritizedReplayBuffer
    from tianshou.data.utils.segtree import SegmentTree

    tree = SegmentTree(capacity)
    tree[np.arange(capacity)] = rng.random(capacity)

    def update(k):
        def call():
            s = pool.take(k)
            tree[pool.slots[s]] = pool.values[s]

        return call

    buf = PrioritizedReplayBuffer(capacity, alpha=0.6, beta=0.4)
    obs = np.zeros((capacity, 1), dtype=np.float32)
    flags = np.zeros(capacity, dtype=bool)
    dummy = Batch(obs=obs, act=np.zeros(capacity, dtype=np.int64), rew=np.zeros(capacity, dtype=np.float32),
                  terminated=flags, truncated=flags, done=flags, obs_next=obs)  # fmt: skip
    buf.set_batch(dummy)
    buf._size = capacity  # as tianshou's own ReplayBuffer.from_data marks a set batch as stored
    buf.update_weight(np.arange(capacity), rng.standard_normal(capacity))

    def per_step(k):
        def step():
            idx = buf.sample_indices(k)
            buf.get_weight(idx)
            buf.update_weight(idx, pool.td[pool.take(k)])

        return step

    def sample(k):  # stratified queries, one per k-th of the mass, as prioritylab's tree and cpprb draw them
        stride = np.arange(k)
        return lambda: tree.get_prefix_sum_idx((stride + rng.random(k)) * (tree.reduce() / k))

    return [
        Contender("tianshou", "update", False, update),
        Contender("tianshou", "sample", False, sample),
        Contender("tianshou", "per-step", False, per_step),
    ]


def _cpprb(capacity: int, pool: Pool, rng: np.random.Generator) -> list[Contender]:
    from cpprb import PrioritizedReplayBuffer

    buf = PrioritizedReplayBuffer(capacity, {"obs": {"shape": 1}}, alpha=0.6)
    buf.add(obs=np.zeros((capacity, 1)))
    buf.update_priorities(np.arange(capacity), np.abs(rng.standard_normal(capacity)))
    # cpprb's own dtypes (size_t indexes, float32 priorities, as its sample returns and a float32 learner
    # gives): int64 slots and float64 values would charge it a copy per call that its users do not make
    slots, values, td = pool.slots.astype(np.uint64), pool.values.astype(np.float32), pool.td.astype(np.float32)

    def per_step(k):
        def step():
            batch = buf.sample(k, beta=0.4)
            buf.update_priorities(batch["indexes"], np.abs(td[pool.take(k)]))

        return step

    def update(k):
        def call():
            s = pool.take(k)
            buf.update_priorities(slots[s], values[s])

        return call

    return [
        Contender("cpprb", "update", False, update),
        Contender("cpprb", "sample", False, lambda k: lambda: buf.sample(k, beta=0.4)),
        Contender("cpprb", "per-step", False, per_step),
    ]


BUILDERS = {"prioritylab": _prioritylab, "tianshou": _tianshou, "cpprb": _cpprb, "numpy": _numpy}


def available_peers(wanted: Iterable[str] = PEERS) -> tuple[list[str], dict[str, str]]:
    """The peers that import, and why the others were skipped."""
    return importable(wanted, {"tianshou": ("tianshou.data",), "cpprb": ("cpprb",), "numpy": ()})


# ------------------------------------------------------------------------------------------- runs


def run(
    capacities: Iterable[int],
    batches: Iterable[int],
    seconds: float = 0.5,
    repeats: int = 3,
    peers: Iterable[str] = PEERS,
    ops: Iterable[str] = OPS,
    seed: int = 0,
    progress: bool = True,
) -> list[Result]:
    """Measure every contender on every (capacity, batch, op) cell; see the module docstring."""
    from tqdm.auto import tqdm

    batches, ops = list(batches), list(ops)
    names = ["prioritylab", *peers]
    pool_size = max(POOL, 4 * max(batches), 4 * JITTED_OPS)
    results = []
    with tqdm(total=0, disable=not progress, desc="sumtree bench", unit="cell") as bar:
        for capacity in capacities:
            rng = np.random.default_rng(seed)
            pool = Pool(capacity, rng, pool_size)
            bar.set_postfix_str(f"capacity {capacity}: filling")
            contenders = [c for name in names for c in BUILDERS[name](capacity, pool, rng) if c.op in ops]
            results += _run_capacity(capacity, contenders, batches, ops, seconds, repeats, bar)
            del contenders  # free this capacity's structures before building the next
    return results


def _run_capacity(capacity, contenders, batches, ops, seconds, repeats, bar) -> list[Result]:
    """All cells of one capacity: ``repeats`` rounds, contenders interleaved in rotating order."""

    def group(k, op):  # jitted batch-1 loops are measured at batch 1 only
        return [c for c in contenders if c.op == op and (c.ops_per_call == 1 or k == 1)]

    cells = [(k, op) for k in batches for op in ops]
    bar.total += repeats * sum(len(group(k, op)) for k, op in cells)
    bar.refresh()
    rates: dict[tuple[int, str, str], list[float]] = {}
    for r in range(repeats):
        for i, (k, op) in enumerate(cells):
            bar.set_postfix_str(f"capacity {capacity}, repeat {r + 1}/{repeats}, batch {k}, {op}")
            members = group(k, op)
            shift = (r + i) % max(1, len(members))
            for c in members[shift:] + members[:shift]:
                rate = measure(c.make(k), seconds) * c.ops_per_call
                rates.setdefault((k, op, c.name), []).append(rate)
                bar.update(1)
    return [res for k, op in cells for res in _cell_results(capacity, k, op, contenders, rates)]


def _cell_results(capacity, k, op, contenders, rates) -> list[Result]:
    """Median rates of one cell and their ratios to the cell's fastest peer."""
    cell = []
    for c in contenders:
        if c.op != op or (k, op, c.name) not in rates:
            continue
        rs = rates[(k, op, c.name)]
        calls = float(np.median(rs))
        cell.append(Result(capacity, k, op, c.name, c.ours, calls, calls * k, rs))
    peer_rates = [res.calls_per_s for res in cell if not res.ours]
    if peer_rates:
        best = max(peer_rates)
        for res in cell:
            if not res.contender.endswith("(jitted)"):
                res.ratio = res.calls_per_s / best
    return cell


# ---------------------------------------------------------------------------------------- output


def _pow2(n: int) -> str:
    return f"2^{n.bit_length() - 1}" if n > 0 and n & (n - 1) == 0 else str(n)


def format_table(results: list[Result]) -> str:
    """Plain-text table: one row per contender and cell, with the ratio to the fastest peer."""
    head = (
        f"{'capacity':>8} {'batch':>5} {'operation':<9} {'contender':<21} "
        f"{'calls/s':>11} {'items/s':>12} {'vs best peer':>12}"
    )
    lines = [head, "-" * len(head)]
    prev = None
    for r in results:
        key = (r.capacity, r.batch, r.op)
        if prev is not None and key != prev:
            lines.append("")
        prev = key
        ratio = "" if r.ratio is None else f"{r.ratio:.2f}x"
        if not r.ours and r.ratio is not None and math.isclose(r.ratio, 1.0):
            ratio = "(best peer)"
        lines.append(
            f"{_pow2(r.capacity):>8} {r.batch:>5} {r.op:<9} {r.contender:<21} {r.calls_per_s:>11,.0f} "
            f"{r.items_per_s:>12,.0f} {ratio:>12}"
        )
    return "\n".join(lines)


def to_json(results: list[Result], config: dict, skipped: dict[str, str], machine_load: dict) -> dict:
    return record(config, skipped, machine_load, [asdict(r) for r in results], peers=("cpprb", "tianshou"))


# ----------------------------------------------------------------------------------------- drift


def drift_check(
    updates: int, capacity: int = 2**20, batch: int = 1024, checks: int = 10, seed: int = 0, progress: bool = False
) -> float:
    """Worst ``|root - sum(leaves)| / root`` over ``checks`` checkpoints of ``updates`` random updates.

    Masses are log-normal (a spread of many orders of magnitude) written at
    random slots in batches; ``sum(leaves)`` is the exactly rounded
    ``math.fsum``.  Parents are recomputed from children, so the error stays
    at the rounding of one summation however many updates are made.
    """
    from tqdm.auto import tqdm

    rng = np.random.default_rng(seed)
    tree = SumTree(capacity, track_min=False, track_max=False)
    tree.update(np.arange(capacity), rng.lognormal(0.0, 3.0, capacity))
    calls = max(1, updates // batch)
    every = max(1, calls // checks)
    worst = 0.0
    block = max(1, (1 << 22) // batch)  # draw the random numbers for many calls at once
    with tqdm(total=calls * batch, disable=not progress, desc="drift", unit="upd", unit_scale=True) as bar:
        done = 0
        while done < calls:
            n = min(block, calls - done)
            slots = rng.integers(0, capacity, (n, batch))
            values = rng.lognormal(0.0, 3.0, (n, batch))
            for i in range(n):
                tree.update(slots[i], values[i])
                done += 1
                if done % every == 0 or done == calls:
                    exact = math.fsum(tree.leaves)
                    worst = max(worst, abs(tree.total - exact) / exact)
            bar.update(n * batch)
    return worst
