"""Replay-buffer step throughput and memory, prioritylab's buffer against peer libraries.

One *replay step*, as a deep RL learner with ``N`` environments does it:

1. add one transition from each of the ``N`` environments;
2. sample 256 transitions (with IS weights, ``beta = 0.4``, for the prioritized
   buffers), gather their fields and hand them over as torch tensors on the
   device (``--device``: the CPU by default, where the tensors share the
   gathered arrays; on a CUDA device each step ends with a device
   synchronisation, so the copies are timed in full);
3. update the 256 priorities from fresh TD errors (prioritized buffers only).

Layouts:

* ``mujoco``: observations of 17 float32, actions of 6 float32, 10^6 slots;
* ``atari``: 84x84 uint8 frames stacked by 4, one int64 action, 10^5 slots
  (so that every contender fits in memory at once).

The contenders, and how each is built and filled, are in
:mod:`prioritylab.bench.replay_contenders`.

``prioritylab per`` is compared with the fastest prioritized peer, ``prioritylab
uniform`` with ``sb3``.  Every buffer is filled to capacity before timing; the
timed steps end no episode (for anyone).  Inputs are pre-made (a pool of
steps cycled through), so making them is not charged to anyone.

Timing as in :mod:`prioritylab.bench.sumtree`: each measurement loops one
contender's step for ``seconds`` after warm-up steps; the contenders of a cell
are interleaved, their order rotating every repeat, and the median over
``repeats`` is reported.

Every contender is self-checked before anything is timed (:mod:`prioritylab.bench.replay_check`): one that
fails is still timed, but its row gets no ratio and no ratio is taken against it.

Memory (Atari layout): resident bytes per transition, measured as the growth
of the process's resident set while each buffer is built and filled (and, for
prioritylab, :meth:`prioritylab.replay.ReplayBuffer.memory_bytes`), next to
:func:`prioritylab.replay.estimate_bytes` and to storing stacked ``obs`` and
``next_obs`` per transition.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

import numpy as np

from ..replay import estimate_bytes
from . import record
from .replay_check import CheckResult, self_check
from .replay_contenders import LAYOUTS, PEERS, Contender, Layout, Steps, makers
from .sumtree import measure


@dataclass
class Result:
    """One contender's median steps/s in one (layout, N) cell, its ratio, and its memory."""

    layout: str
    num_envs: int
    capacity: int
    contender: str
    ours: bool
    steps_per_s: float
    rates: list[float]
    ratio: float | None = None
    """Ours: over the fastest comparable peer (prioritized for ``per``, ``sb3`` for ``uniform``)."""
    versus: str | None = None
    rss_bytes: int | None = None
    """Growth of the resident set while this buffer was built and filled."""
    memory_bytes: int | None = None
    """Bytes of the buffer's arrays: prioritylab's ``memory_bytes()``; the ``nbytes`` of tianshou's and
    stable-baselines3's arrays (cpprb's storage is not visible from Python)."""
    stores: str = ""
    extra: dict = field(default_factory=dict)
    check: str = ""
    """Why this contender failed its self-check (:func:`self_check`), in one line; empty when it passed.  A
    contender that failed is timed and listed but given no ratio, and is no one's ratio's peer."""


# ------------------------------------------------------------------------------------------- runs


def rss_bytes() -> int | None:
    """Resident set size of this process (Linux ``/proc``; None elsewhere)."""
    try:
        with open("/proc/self/statm") as fh:
            import os

            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def build(layout: Layout, n: int, capacity: int, peers: Iterable[str], seed: int = 0, bar=None,
          device: str = "cpu") -> list[Contender]:  # fmt: skip
    """Build and fill every contender of one cell, recording each one's resident-set growth."""
    out = []
    for k, (name, make) in enumerate(makers(layout, n, peers, device)):
        if bar is not None:
            bar.set_postfix_str(f"{layout.name}, N={n}: filling {name}")
        steps = Steps(layout, n, np.random.default_rng(seed + k))
        make(64 * n, steps).step()  # imports and JIT compilation, so the resident-set growth is the buffer's
        gc.collect()
        before = rss_bytes()
        c = make(capacity, steps)
        after = rss_bytes()
        c.rss_bytes = None if before is None or after is None else after - before
        out.append(c)
    return out


def run(
    layouts: Iterable[str] = tuple(LAYOUTS),
    num_envs: Iterable[int] = (1, 8),
    seconds: float = 1.0,
    repeats: int = 3,
    peers: Iterable[str] = PEERS,
    capacities: dict[str, int] | None = None,
    seed: int = 0,
    progress: bool = True,
    device: str = "cpu",
    checks: list[CheckResult] | None = None,
) -> list[Result]:
    """Measure every contender on every (layout, N) cell; see the module docstring.

    ``checks``: the :func:`self_check` of these cells; without it the check is run here, before any
    timing.  A contender that failed it, or was not checked, is timed but given no ratio and is no
    one's ratio's peer (its :attr:`Result.check` says why).
    """
    from tqdm.auto import tqdm

    layouts, num_envs, peers = list(layouts), list(num_envs), list(peers)
    if checks is None:
        checks = self_check(layouts, num_envs, peers, seed=seed, device=device, progress=progress)
    verdicts = {(c.layout, c.num_envs, c.contender): c for c in checks}
    results = []
    with tqdm(total=0, disable=not progress, desc="replay bench", unit="run") as bar:
        for name in layouts:
            layout = LAYOUTS[name]
            capacity = (capacities or {}).get(name, layout.capacity)
            for n in num_envs:
                cap = capacity - capacity % n
                contenders = build(layout, n, cap, peers, seed, bar, device)
                bar.total += repeats * len(contenders)
                bar.refresh()
                rates: dict[str, list[float]] = {}
                for r in range(repeats):
                    bar.set_postfix_str(f"{name}, N={n}, repeat {r + 1}/{repeats}")
                    shift = r % len(contenders)
                    for c in contenders[shift:] + contenders[:shift]:
                        rates.setdefault(c.name, []).append(measure(c.step, seconds))
                        bar.update(1)
                refused = {}
                for c in contenders:
                    verdict = verdicts.get((name, n, c.name))
                    if verdict is None:
                        refused[c.name] = "not self-checked"
                    elif not verdict.passed:
                        refused[c.name] = f"failed its self-check: {verdict.reason}"
                results += _cell_results(layout, n, cap, contenders, rates, refused)
                del contenders
                gc.collect()
    return results


def _cell_results(layout: Layout, n: int, capacity: int, contenders: list[Contender], rates,
                  refused: dict[str, str] | None = None) -> list[Result]:  # fmt: skip
    """The cell's results and ratios; ``refused`` names the contenders given no ratio (and why)."""
    refused = refused or {}
    cell = [
        Result(layout.name, n, capacity, c.name, c.ours, float(np.median(rates[c.name])), rates[c.name],
               rss_bytes=c.rss_bytes, memory_bytes=c.memory_bytes, stores=c.stores, check=refused.get(c.name, ""))
        for c in contenders
    ]  # fmt: skip
    kinds = {c.name: c.kind for c in contenders}
    for res in cell:
        if not res.ours or res.check:
            continue
        rivals = [p for p in cell if not p.ours and not p.check and kinds[p.contender] == kinds[res.contender]]
        if rivals:
            best = max(rivals, key=lambda p: p.steps_per_s)
            res.ratio, res.versus = res.steps_per_s / best.steps_per_s, best.contender
    return cell


# ---------------------------------------------------------------------------------------- output


def memory_rows(results: list[Result], per: int = 100_000) -> list[dict]:
    """Bytes per ``per`` transitions of each contender (Atari layout when present, else all)."""
    rows = []
    frames = [r for r in results if LAYOUTS[r.layout].frame_stack > 1]
    for r in frames or results:
        layout = LAYOUTS[r.layout]
        stacked = 2 * layout.stacked_obs_bytes * per
        formula = None
        if r.ours:
            formula = estimate_bytes(
                per, layout.obs_shape, layout.obs_dtype, layout.action_shape, layout.action_dtype, layout.frame_stack,
                diagnostics=r.contender.endswith(" +diagnostics"),
            )
        rows.append({
            "layout": r.layout, "num_envs": r.num_envs, "contender": r.contender, "stores": r.stores,
            "rss": None if r.rss_bytes is None else r.rss_bytes * per / r.capacity,
            "reported": None if r.memory_bytes is None else r.memory_bytes * per / r.capacity,
            "formula": formula, "stacked_obs_and_next_obs": stacked,
        })  # fmt: skip
    return rows


def format_table(results: list[Result]) -> str:
    head = f"{'layout':<7} {'N':>2} {'contender':<28} {'steps/s':>10} {'vs best peer':>22}"
    lines = [head, "-" * len(head)]
    prev = None
    for r in results:
        if prev is not None and (r.layout, r.num_envs) != prev:
            lines.append("")
        prev = (r.layout, r.num_envs)
        ratio = "no ratio: self-check" if r.check else "" if r.ratio is None else f"{r.ratio:.2f}x ({r.versus})"
        lines.append(f"{r.layout:<7} {r.num_envs:>2} {r.contender:<28} {r.steps_per_s:>10,.0f} {ratio:>22}")
    return "\n".join(lines)


def format_memory(results: list[Result], per: int = 100_000) -> str:
    def mb(x):
        return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x / 1e6:,.0f}"

    head = (
        f"{'layout':<7} {'N':>2} {'contender':<28} {'RSS MB':>8} {'reported':>9} {'formula':>8} "
        f"{'stacked':>8} {'/stacked':>9}  stores"
    )
    def grown(x):  # a resident set that did not grow measured nothing: the build reused memory freed before it
        if x is not None and not math.isnan(x) and x < 0.5e6:
            return "—" if x <= 0 else "<1"
        return mb(x)

    lines = [f"memory per {per:,} transitions (MB; RSS: the resident set's growth while the buffer was built, "
             "— where it reused freed memory and did not grow)", head, "-" * len(head)]  # fmt: skip
    for row in memory_rows(results, per):
        measured = row["reported"] if row["reported"] is not None else row["rss"]
        frac = "" if not measured or measured < 0.5e6 else f"1/{row['stacked_obs_and_next_obs'] / measured:.1f}"
        lines.append(
            f"{row['layout']:<7} {row['num_envs']:>2} {row['contender']:<28} {grown(row['rss']):>8} "
            f"{mb(row['reported']):>9} {mb(row['formula']):>8} {mb(row['stacked_obs_and_next_obs']):>8} "
            f"{frac:>9}  {row['stores']}"
        )
    return "\n".join(lines)


def to_json(results: list[Result], config: dict, skipped: dict[str, str], machine_load: dict,
            checks: list[CheckResult] | None = None) -> dict:  # fmt: skip
    return record(config, skipped, machine_load, [asdict(r) for r in results],
                  peers=("cpprb", "tianshou", "stable-baselines3", "torch"),
                  self_check=[asdict(c) for c in checks or []], memory_per_100k=memory_rows(results))  # fmt: skip
