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

Contenders (peers are optional and skipped when not importable; install them
with the ``bench`` extra):

* ``prioritylab per`` / ``prioritylab uniform``: :class:`prioritylab.replay.ReplayBuffer`
  over the ``per`` or ``uniform`` sampler; one vectorised ``add`` per step,
  ``sample(256, beta=0.4, device=device)`` (one transfer per field) and ``update(batch, td)``.  It stores
  each observation (its newest frame) once.  Built with ``diagnostics=False``, as the
  peers compute no replay diagnostics; ``prioritylab per +diagnostics`` is the same
  ``per`` buffer with them on (what a training run of the agents pays).  ``prioritylab
  per`` normalises its IS weights by the largest over the whole buffer, as cpprb does (with
  a min tree); ``prioritylab per (batch IS)`` by the minibatch's largest, as the deep
  agents do by default and tianshou does by default (``weight_norm=True``; it keeps the
  least priority as one number, no min tree): the like-for-like row against tianshou.
* ``cpprb``: ``cpprb.PrioritizedReplayBuffer``, all ``N`` rows in one ``add``
  call; ``sample(256, beta=0.4)``, ``torch.as_tensor(field, device=device)`` of
  each field, ``update_priorities``.  With one environment and Atari frames it stores
  ``obs`` once per row (``next_of="obs"``) with ``stack_compress="obs"`` (which
  takes the stack as the last axis, so its frames are given channels-last); those
  options assume consecutive rows come from one stream, so with ``N > 1`` (rows of
  different environments interleaved) it stores ``obs`` and ``next_obs`` in full.
* ``tianshou``: ``tianshou.data.PrioritizedVectorReplayBuffer`` with ``N``
  sub-buffers (one ``add`` of an ``N``-row batch); ``sample(256)``,
  ``torch.as_tensor(field, device=device)`` of each field, ``update_weight``.  For Atari, its own
  frame options: ``stack_num=4``, ``save_only_last_obs=True``,
  ``ignore_obs_next=True`` (one frame per row; stacks rebuilt when sampling).
* ``sb3``: ``stable_baselines3.common.buffers.ReplayBuffer`` (uniform) with
  ``n_envs=N`` and ``device=device``; its ``sample`` already returns torch
  tensors there; no update.  For
  Atari ``optimize_memory_usage=True`` (stacked ``obs`` once per row; the next
  row is the next observation).

``prioritylab per`` is compared with the fastest prioritized peer, ``prioritylab
uniform`` with ``sb3``.  Every buffer is filled to capacity before timing; the
timed steps end no episode (for anyone).  Inputs are pre-made (a pool of
steps cycled through), so making them is not charged to anyone.

Timing as in :mod:`prioritylab.bench.sumtree`: each measurement loops one
contender's step for ``seconds`` after warm-up steps; the contenders of a cell
are interleaved, their order rotating every repeat, and the median over
``repeats`` is reported.

Self-check (:func:`self_check`, run before anything is timed): each contender, built by the
same code on a small buffer (:data:`CHECK_ROWS` slots, Atari frames of :data:`CHECK_FRAME`)
and filled with rows whose content names them (:class:`MarkedSteps`), must hand back the
fields of one written row, the row its reported index holds; a prioritized one, its
priorities set by its own update calls, must draw rows in proportion to ``priority^alpha``
(a G test over :data:`CHECK_DRAWS` draws) and hand back IS weights ``(N P(i))^-beta`` over
the largest of the buffer or of the batch, as it documents; a uniform one must draw
uniformly.  A contender that fails is still timed, but its row gets no ratio and no ratio is
taken against it.  What a peer does otherwise by its own rules (tianshou's edge rows with
frame stacks, its independent draws) is reported as a named difference, not a failure.

Memory (Atari layout): resident bytes per transition, measured as the growth
of the process's resident set while each buffer is built and filled (and, for
prioritylab, :meth:`ReplayBuffer.memory_bytes`), next to
:func:`prioritylab.replay.estimate_bytes` and to storing stacked ``obs`` and
``next_obs`` per transition.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import NamedTuple

import numpy as np

from ..replay import ReplayBuffer, estimate_bytes
from ..samplers import make_sampler
from .sumtree import measure

BATCH = 256
BETA = 0.4
ALPHA = 0.6
POOL_STEPS = 16
"""Pre-made environment steps per contender, cycled through."""
PEERS = ("cpprb", "tianshou", "sb3")
PRIORITIZED_PEERS = ("cpprb", "tianshou")


@dataclass(frozen=True)
class Layout:
    name: str
    obs_shape: tuple
    obs_dtype: type
    action_shape: tuple
    action_dtype: type
    frame_stack: int
    capacity: int

    @property
    def stacked_obs_bytes(self) -> int:
        return int(np.prod(self.obs_shape)) * np.dtype(self.obs_dtype).itemsize


LAYOUTS = {
    "mujoco": Layout("mujoco", (17,), np.float32, (6,), np.float32, 1, 10**6),
    "atari": Layout("atari", (4, 84, 84), np.uint8, (), np.int64, 4, 10**5),
}
QUICK_CAPACITY = {"mujoco": 2**12, "atari": 2**10}


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


class Edge(NamedTuple):
    """Rows where a contender, by its own documented rules, hands back fields other than those written with them."""

    rows: np.ndarray
    fields: frozenset
    """The fields that may differ there (``obs``, ``next_obs``, ``action``, ``reward``)."""
    what: str


@dataclass
class Probe:
    """A contender's own calls, as its timed step makes them, for :func:`check_contender`.

    Rows are numbered as :class:`MarkedSteps` writes them: after ``written`` steps of ``n``
    environments, row ``t * n + e`` is step ``t`` of environment ``e``.
    """

    add: Callable[[], None]
    """Write the pool's next step (the timed step's add)."""
    draw: Callable[[], object]
    """The timed step's sample call and hand-over: one batch of ``BATCH``."""
    view: Callable[[object], dict]
    """A drawn batch as NumPy arrays in the layout's shapes: ``obs``, ``next_obs``, ``action``, ``reward``,
    ``weights`` and ``indices`` (None where the contender hands none back)."""
    update: Callable[[object, np.ndarray], None] | None
    """The timed step's priority update, given the TD errors of a drawn batch; None for a uniform contender."""
    locate: Callable[[np.ndarray, int], np.ndarray] | None
    """The rows the reported indices hold after ``written`` steps; None where no index is reported (SB3)."""
    sampleable: Callable[[int], np.ndarray]
    """The rows the contender may draw after ``written`` steps, by its own rules."""
    eps: float = 0.0
    """What the contender adds to ``|td|`` before raising it to ``alpha``."""
    normalise: str | None = None
    """IS weights divided by the largest weight of the ``"buffer"`` or of the ``"batch"``; None: no IS weights."""
    edges: Callable[[int], dict[str, Edge]] = lambda written: {}
    """Named differences: rows where the contender's own rules hand back other fields than those written."""


@dataclass
class Contender:
    name: str
    ours: bool
    kind: str  # "per" or "uniform"
    step: Callable[[], object]
    stores: str
    memory_bytes: int | None = None
    rss_bytes: int | None = None
    probe: Probe | None = None


class Steps:
    """A pool of pre-made vectorised environment steps, handed out in turn."""

    def __init__(self, layout: Layout, n: int, rng: np.random.Generator, size: int = POOL_STEPS):
        def draw(shape, dtype):
            if np.dtype(dtype).kind == "u":
                return rng.integers(0, 256, (size, n, *shape), dtype=dtype)
            if np.dtype(dtype).kind == "i":
                return rng.integers(0, 6, (size, n, *shape)).astype(dtype)
            return rng.standard_normal((size, n, *shape)).astype(dtype)

        self.obs = draw(layout.obs_shape, layout.obs_dtype)
        self.next_obs = np.roll(self.obs, -1, axis=0)
        self.action = draw(layout.action_shape, layout.action_dtype)
        self.reward = rng.standard_normal((size, n)).astype(np.float32)
        self.done = np.zeros((size, n), dtype=bool)
        self.td = rng.standard_normal((size, BATCH))
        self.size = size
        self.i = 0

    def take(self) -> int:
        i = self.i
        self.i = (i + 1) % self.size
        return i


class MarkedSteps:
    """Environment steps whose content names the row they are written as, for :func:`check_contender`.

    Row ``t * n + e`` is step ``t`` of environment ``e``, one episode per environment that
    never ends.  Its observation encodes ``(t, e)``: on the MuJoCo layout ``obs = t * n + e
    + k / 32`` in component ``k``; with frame stacks each frame carries its own step and
    environment in its first three pixels (``t mod 256``, ``t // 256``, ``e``) and the stack
    of step ``t`` is the frames of steps ``t - 3 .. t``, the first frame repeated before step 0
    (as gymnasium's frame stack pads).  ``next_obs`` of a step is the next step's ``obs``; the
    action and reward are functions of the row.  Unlike :class:`Steps`, the pool is not
    cycled: each step is handed out once.
    """

    def __init__(self, layout: Layout, n: int, size: int):
        self.layout, self.n, self.size, self.i = layout, n, size, 0
        ids = np.arange((size + 1) * n).reshape(size + 1, n)
        if layout.frame_stack > 1:
            k, frame_shape = layout.frame_stack, layout.obs_shape[1:]
            pixels = int(np.prod(frame_shape))
            if pixels < 3 or size >= 2**16 or n > 256:
                raise ValueError(f"marked frames need 3 pixels, < 2^16 steps and <= 256 environments, got "
                                 f"{pixels} pixels, {size} steps, {n} environments")  # fmt: skip
            t = np.arange(size + 1)[:, None, None]
            e = np.arange(n)[None, :, None]
            p = np.arange(pixels)[None, None, :]
            frames = (7 * t + 13 * e + 3 * p) % 256
            frames[..., 0], frames[..., 1] = (t % 256)[..., 0], (t // 256)[..., 0]
            frames[..., 2] = e[..., 0]
            frames = frames.astype(layout.obs_dtype).reshape(size + 1, n, *frame_shape)
            back = np.maximum(np.arange(size + 1)[:, None] - (k - 1) + np.arange(k), 0)  # steps of each stack
            stacks = np.moveaxis(frames[back], 2, 1)  # (step, env, stack, *frame)
        else:
            width = int(np.prod(layout.obs_shape))
            stacks = (ids[..., None] + np.arange(width) / 32).astype(layout.obs_dtype)
            stacks = stacks.reshape(size + 1, n, *layout.obs_shape)
        self.obs, self.next_obs = np.ascontiguousarray(stacks[:-1]), np.ascontiguousarray(stacks[1:])
        ids = ids[:-1]
        if layout.action_shape:
            width = int(np.prod(layout.action_shape))
            action = ids[..., None] + (np.arange(width) + 1) / 64
            self.action = action.astype(layout.action_dtype).reshape(size, n, *layout.action_shape)
        else:  # a discrete action of six, as the peers' Atari action spaces take
            self.action = (ids % 6).astype(layout.action_dtype)
        self.reward = (ids * 0.25 + 0.125).astype(np.float32)
        self.done = np.zeros((size, n), dtype=bool)
        self.td = np.zeros((size, BATCH))
        self.rows = size * n
        flat = (self.rows,)
        self.written = {"obs": self.obs.reshape(flat + layout.obs_shape), "next_obs": self.next_obs.reshape(flat +
                        layout.obs_shape), "action": self.action.reshape(flat + layout.action_shape),
                        "reward": self.reward.reshape(flat)}  # fmt: skip

    def take(self) -> int:
        if self.i >= self.size:
            raise RuntimeError(f"the marked pool's {self.size} steps are all written")
        self.i += 1
        return self.i - 1

    def row_of(self, obs: np.ndarray) -> np.ndarray:
        """The row each observation names (its newest frame, with frame stacks); -1 where it names none."""
        b = obs.shape[0]
        if self.layout.frame_stack > 1:
            f = obs[:, -1].reshape(b, -1).astype(np.int64)
            t, e = f[:, 0] + 256 * f[:, 1], f[:, 2]
            rows = np.where(e < self.n, t * self.n + e, -1)
        else:
            x = obs.reshape(b, -1)[:, 0].astype(np.float64)
            rows = np.where(x == np.round(x), np.round(x), -1).astype(np.int64)
        return np.where((rows >= 0) & (rows < self.rows), rows, -1)

    def where(self, row: int) -> str:
        return f"step {row // self.n} of env {row % self.n}"


# --------------------------------------------------------------------------------------- helpers


def rss_bytes() -> int | None:
    """Resident set size of this process (Linux ``/proc``; None elsewhere)."""
    try:
        with open("/proc/self/statm") as fh:
            import os

            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def array_bytes(obj, depth: int = 3) -> int:
    """Bytes of the NumPy arrays an object holds in its attributes (nested ``depth`` deep)."""
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if depth == 0:
        return 0
    values = obj.values() if isinstance(obj, dict) else getattr(obj, "__dict__", {}).values()
    return sum(array_bytes(v, depth - 1) for v in values)


def _fill_steps(capacity: int, n: int) -> int:
    return capacity // n


# ------------------------------------------------------------------------------------- contenders


def _host(x) -> np.ndarray:
    """A handed-over field (torch tensor on any device, or array) as a NumPy array."""
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _rows(n: int, first: int, last: int) -> np.ndarray:
    """Rows of steps ``first`` to ``last`` (both included) of every one of ``n`` environments."""
    return (np.arange(max(first, 0), last + 1)[:, None] * n + np.arange(n)).ravel()


def _per_env_locate(n: int, seg: int) -> Callable[[np.ndarray, int], np.ndarray]:
    """Rows held by the slots of a buffer that gives environment ``e`` the ring ``[e * seg, (e + 1) * seg)``
    (prioritylab and tianshou): after ``steps`` steps, slot ``e * seg + j`` holds the newest step ``t = j mod seg``."""

    def locate(idx: np.ndarray, steps: int) -> np.ndarray:
        env, j = np.divmod(idx, seg)
        return (j + seg * ((steps - 1 - j) // seg)) * n + env

    return locate


def _prioritylab(kind: str, layout: Layout, n: int, capacity: int, steps: Steps, diagnostics: bool = False,
                 normalise: str | None = None, device: str = "cpu") -> Contender:  # fmt: skip
    import torch  # noqa: F401  (imported before timing, as by every contender)

    options = {} if normalise is None else {"normalise": normalise}
    buf = ReplayBuffer(
        capacity, layout.obs_shape, layout.action_shape, sampler=make_sampler(kind, capacity, seed=0, **options),
        num_envs=n, obs_dtype=layout.obs_dtype, action_dtype=layout.action_dtype, frame_stack=layout.frame_stack,
        diagnostics=diagnostics,
    )  # fmt: skip

    def add(i):
        buf.add(steps.obs[i], steps.action[i], steps.reward[i], steps.next_obs[i], steps.done[i], steps.done[i])

    for _ in range(_fill_steps(capacity, n)):
        add(steps.take())

    def draw():
        return buf.sample(BATCH, beta=BETA, device=device)

    def update(batch, td):
        buf.update(batch, td)

    def step():  # the timed step makes the library's calls itself; the closures above serve the self-check
        i = steps.take()
        buf.add(steps.obs[i], steps.action[i], steps.reward[i], steps.next_obs[i], steps.done[i], steps.done[i])
        batch = buf.sample(BATCH, beta=BETA, device=device)
        if kind == "per":
            buf.update(batch, steps.td[i])
        return batch

    def view(batch) -> dict:
        return {"obs": _host(batch.obs), "next_obs": _host(batch.next_obs), "action": _host(batch.action),
                "reward": _host(batch.reward), "weights": _host(batch.weights), "indices": batch.indices}  # fmt: skip

    seg, k = capacity // n, layout.frame_stack

    def sampleable(written: int) -> np.ndarray:
        # The newest step of each environment waits for its next observation (stored as the next step's obs); once
        # the ring has wrapped, a step whose stack reads an overwritten frame is held back as well.
        first = 0 if written <= seg else written - seg + k - 1
        return _rows(n, first, written - 2)

    # Conventions (prioritylab.samplers.per): p = |td| + eps with eps = 1e-6, mass p^alpha, the sampler applies alpha;
    # a batch is stratified (one draw from each of BATCH equal slices of the total mass); IS weights (N P(i))^-beta
    # over the largest of the buffer (a min tree) or, with normalise="batch", of the batch.
    probe = Probe(
        add=lambda: add(steps.take()), draw=draw, view=view, update=update if kind == "per" else None,
        locate=_per_env_locate(n, seg), sampleable=sampleable, eps=buf.sampler.config().get("eps", 0.0),
        normalise=None if kind != "per" else ("batch" if normalise == "batch" else "buffer"),
    )  # fmt: skip
    stores = "newest frame of each observation once per slot" if layout.frame_stack > 1 else "obs once per slot"
    name = f"prioritylab {kind}" + (" (batch IS)" if normalise == "batch" else "")
    name += " +diagnostics" if diagnostics else ""
    return Contender(name, True, kind, _synced(step, device), stores, memory_bytes=buf.memory_bytes(), probe=probe)


def _synced(step: Callable[[], object], device: str) -> Callable[[], object]:
    """``step``, waiting for the device at its end when the device is CUDA (copies are asynchronous there)."""
    if not device.startswith("cuda"):
        return step
    import torch

    def synced():
        out = step()
        torch.cuda.synchronize()
        return out

    return synced


def _tensor(device: str) -> Callable[[np.ndarray], object]:
    """A peer's way to a torch tensor on ``device``: shared memory on the CPU, else a copy there."""
    import torch

    if device == "cpu":
        return torch.from_numpy
    return lambda arr: torch.as_tensor(arr, device=device)


def _cpprb(layout: Layout, n: int, capacity: int, steps: Steps, device: str = "cpu") -> Contender:
    from cpprb import PrioritizedReplayBuffer

    act_shape = layout.action_shape or 1
    compact = layout.frame_stack > 1 and n == 1
    obs, next_obs, obs_shape = steps.obs, steps.next_obs, layout.obs_shape
    if compact:  # cpprb compresses stacks along the last axis: frames go channels-last
        obs = np.ascontiguousarray(np.moveaxis(obs, 2, -1))
        next_obs = np.ascontiguousarray(np.moveaxis(next_obs, 2, -1))
        obs_shape = obs.shape[2:]
    env_dict = {
        "obs": {"shape": obs_shape, "dtype": layout.obs_dtype},
        "act": {"shape": act_shape, "dtype": layout.action_dtype},
        "rew": {},
        "done": {},
    }
    # Conventions (cpprb's PrioritizedReplayBuffer docstrings): it applies alpha itself and adds eps = 1e-4 to the
    # priority it is given, mass (p + eps)^alpha; it is given |td| here.  A batch is stratified (one draw from each
    # of BATCH equal slices of the total mass); IS weights are divided by the weight of the least priority stored
    # (the buffer's largest weight).  Every stored row may be drawn; with next_of="obs" the newest row's next_obs is
    # kept apart until the next add.
    if compact:
        # one stream: the next row's obs is this row's next_obs; consecutive stacks share frames
        buf = PrioritizedReplayBuffer(capacity, env_dict, alpha=ALPHA, next_of="obs", stack_compress="obs")
        stores = "obs once per row (next_of), stack-compressed, frames channels-last"
    else:
        env_dict["next_obs"] = env_dict["obs"]
        buf = PrioritizedReplayBuffer(capacity, env_dict, alpha=ALPHA)
        stores = "obs and next_obs per row" + (" (stacked)" if layout.frame_stack > 1 else "")
    acts = steps.action.reshape(steps.size, n, -1)

    def add(i):
        buf.add(obs=obs[i], act=acts[i], rew=steps.reward[i], next_obs=next_obs[i], done=steps.done[i])

    for _ in range(_fill_steps(capacity, n)):
        add(steps.take())

    fields = ("obs", "act", "rew", "next_obs", "done", "weights")

    def draw():
        s = buf.sample(BATCH, beta=BETA)
        return s["indexes"], {k: tensor(s[k]) for k in fields}

    def update(drawn, td):
        buf.update_priorities(drawn[0], np.abs(td))

    def step():  # the timed step makes the library's calls itself; the closures above serve the self-check
        i = steps.take()
        buf.add(obs=obs[i], act=acts[i], rew=steps.reward[i], next_obs=next_obs[i], done=steps.done[i])
        s = buf.sample(BATCH, beta=BETA)
        out = {k: tensor(s[k]) for k in fields}
        buf.update_priorities(s["indexes"], np.abs(steps.td[i]))
        return out

    def view(drawn) -> dict:
        idx, out = drawn
        o, no = _host(out["obs"]), _host(out["next_obs"])
        if compact:
            o, no = np.moveaxis(o, -1, 1), np.moveaxis(no, -1, 1)
        b = o.shape[0]
        return {"obs": o, "next_obs": no, "action": _host(out["act"]).reshape(b, *layout.action_shape),
                "reward": _host(out["rew"]).reshape(b), "weights": _host(out["weights"]),
                "indices": np.asarray(idx, dtype=np.int64)}  # fmt: skip

    def locate(idx: np.ndarray, written: int) -> np.ndarray:
        # one ring over the rows in the order written: row r sits at r mod capacity
        last = written * n - 1
        return idx + capacity * ((last - idx) // capacity)

    def sampleable(written: int) -> np.ndarray:
        return np.arange(max(written * n - capacity, 0), written * n)

    tensor = _tensor(device)
    probe = Probe(add=lambda: add(steps.take()), draw=draw, view=view, update=update, locate=locate,
                  sampleable=sampleable, eps=1e-4, normalise="buffer")  # fmt: skip
    return Contender("cpprb", False, "per", _synced(step, device), stores, probe=probe)


def _tianshou(layout: Layout, n: int, capacity: int, steps: Steps, device: str = "cpu") -> Contender:
    from tianshou.data import Batch, PrioritizedVectorReplayBuffer

    kw = {}
    stores = "obs and obs_next per row"
    if layout.frame_stack > 1:
        kw = {"stack_num": layout.frame_stack, "save_only_last_obs": True, "ignore_obs_next": True}
        stores = "newest frame of obs once per row (save_only_last_obs, ignore_obs_next)"
    # Conventions (tianshou.data.buffer.prio): update_weight takes |td| itself, adds float32's eps (1.19e-7) and
    # applies alpha, mass (|td| + eps)^alpha; new rows get the largest priority given so far (1 at first).  The
    # rows of a batch are drawn independently.  IS weights are (mass / least priority given)^-beta, the least
    # priority not raised to alpha, then divided by the batch's largest (weight_norm=True, the default), which
    # cancels that least priority: (N P(i))^-beta over the batch's largest (the vector buffer keeps weight_norm=True
    # whatever it is given: it rebuilds itself from its sub-buffers' options, which do not hold it).  Every stored
    # row may be drawn, the newest of each environment included.
    buf = PrioritizedVectorReplayBuffer(capacity, n, alpha=ALPHA, beta=BETA, **kw)
    batches = [
        Batch(obs=steps.obs[i], act=steps.action[i], rew=steps.reward[i], terminated=steps.done[i],
              truncated=steps.done[i], obs_next=steps.next_obs[i], info=Batch())
        for i in range(steps.size)
    ]  # fmt: skip
    ids = np.arange(n)
    for _ in range(_fill_steps(capacity, n)):
        buf.add(batches[steps.take()], buffer_ids=ids)
    fields = ("obs", "act", "rew", "obs_next", "terminated", "weight")

    def draw():
        b, idx = buf.sample(BATCH)
        return idx, {k: tensor(np.asarray(b[k])) for k in fields}

    def update(drawn, td):
        buf.update_weight(drawn[0], td)

    def step():  # the timed step makes the library's calls itself; the closures above serve the self-check
        i = steps.take()
        buf.add(batches[i], buffer_ids=ids)
        b, idx = buf.sample(BATCH)
        out = {k: tensor(np.asarray(b[k])) for k in fields}
        buf.update_weight(idx, steps.td[i])
        return out

    def view(drawn) -> dict:
        idx, out = drawn
        return {"obs": _host(out["obs"]), "next_obs": _host(out["obs_next"]), "action": _host(out["act"]),
                "reward": _host(out["rew"]), "weights": _host(out["weight"]), "indices": np.asarray(idx)}  # fmt: skip

    seg, k = capacity // n, layout.frame_stack

    def sampleable(written: int) -> np.ndarray:
        return _rows(n, written - seg, written - 1)

    def edges(written: int) -> dict[str, Edge]:
        if k == 1:  # obs_next is stored with each row
            return {}
        # With ignore_obs_next, obs_next is the stack at next(index), and next() treats the newest index of an
        # environment as an episode's end: its obs_next is its own obs.  prev() treats the index after the newest
        # (the oldest, once the ring has wrapped) as an episode's start: the stacks of the oldest k - 1 rows repeat
        # the oldest stored frame where the overwritten earlier frames were.
        out = {"newest row's obs_next": Edge(
            _rows(n, written - 1, written - 1), frozenset({"next_obs"}),
            "samples the newest row of each environment before its next observation is stored and hands back "
            "its own obs as obs_next")}  # fmt: skip
        if written > seg:
            out["oldest rows' stacks"] = Edge(
                _rows(n, written - seg, written - seg + k - 2), frozenset({"obs", "next_obs"}),
                f"once the ring has wrapped, pads the stacks of the oldest {k - 1} rows of each environment with the "
                "oldest stored frame instead of the overwritten frames written with them")  # fmt: skip
        return out

    tensor = _tensor(device)
    probe = Probe(add=lambda: buf.add(batches[steps.take()], buffer_ids=ids), draw=draw, view=view, update=update,
                  locate=_per_env_locate(n, seg), sampleable=sampleable, eps=float(np.finfo(np.float32).eps),
                  normalise="batch", edges=edges)  # fmt: skip
    return Contender("tianshou", False, "per", _synced(step, device), stores, memory_bytes=array_bytes(buf._meta),
                     probe=probe)  # fmt: skip


def _sb3(layout: Layout, n: int, capacity: int, steps: Steps, device: str = "cpu") -> Contender:
    from gymnasium import spaces
    from stable_baselines3.common.buffers import ReplayBuffer as SB3ReplayBuffer

    if np.dtype(layout.obs_dtype).kind == "u":
        obs_space = spaces.Box(0, 255, layout.obs_shape, dtype=layout.obs_dtype)
    else:
        obs_space = spaces.Box(-np.inf, np.inf, layout.obs_shape, dtype=layout.obs_dtype)
    if layout.action_shape:
        act_space = spaces.Box(-1.0, 1.0, layout.action_shape, dtype=layout.action_dtype)
    else:
        act_space = spaces.Discrete(6)
    optimize = layout.frame_stack > 1
    buf = SB3ReplayBuffer(
        capacity, obs_space, act_space, device=device, n_envs=n, optimize_memory_usage=optimize,
        handle_timeout_termination=False,
    )  # fmt: skip
    infos = [{} for _ in range(n)]
    acts = steps.action.reshape(steps.size, n, -1) if not layout.action_shape else steps.action

    def add(i):
        buf.add(steps.obs[i], steps.next_obs[i], acts[i], steps.reward[i], steps.done[i], infos)

    for _ in range(_fill_steps(capacity, n)):
        add(steps.take())

    def step():
        add(steps.take())
        return buf.sample(BATCH)

    def view(s) -> dict:
        b = s.observations.shape[0]
        return {"obs": _host(s.observations), "next_obs": _host(s.next_observations),
                "action": _host(s.actions).reshape(b, *layout.action_shape), "reward": _host(s.rewards).reshape(b),
                "weights": None, "indices": None}  # fmt: skip

    seg = capacity // n

    def sampleable(written: int) -> np.ndarray:
        # Conventions (stable_baselines3.common.buffers.ReplayBuffer.sample): uniform over (position, environment);
        # with optimize_memory_usage a row's next_obs is the next position's obs, so once full it never draws the
        # position written next, whose obs the newest row's next_obs has overwritten.
        if written < seg:
            return _rows(n, 0, written - 1)
        return _rows(n, written - seg + (1 if optimize else 0), written - 1)

    probe = Probe(add=lambda: add(steps.take()), draw=lambda: buf.sample(BATCH), view=view, update=None, locate=None,
                  sampleable=sampleable)  # fmt: skip
    stores = "stacked obs once per row (optimize_memory_usage)" if optimize else "obs and next_obs per row"
    return Contender("sb3", False, "uniform", _synced(step, device), stores, memory_bytes=array_bytes(buf, 1),
                     probe=probe)  # fmt: skip


PEER_BUILDERS = {"cpprb": _cpprb, "tianshou": _tianshou, "sb3": _sb3}


def available_peers(wanted: Iterable[str] = PEERS) -> tuple[list[str], dict[str, str]]:
    """The peers that import (with torch), and why the others were skipped."""
    ok, skipped = [], {}
    for name in wanted:
        try:
            import torch  # noqa: F401

            if name == "cpprb":
                import cpprb  # noqa: F401
            elif name == "tianshou":
                import tianshou.data  # noqa: F401
            elif name == "sb3":
                import stable_baselines3.common.buffers  # noqa: F401
            else:
                raise ValueError(f"unknown peer {name!r}")
        except ImportError as err:
            skipped[name] = f"not importable ({err})"
            continue
        ok.append(name)
    return ok, skipped


# ------------------------------------------------------------------------------------------- self-check

CHECK_DRAWS = 200_000
"""Rows drawn (in batches of ``BATCH``) for the frequency test and the IS weights of one contender."""
CHECK_LEVEL = 1e-6
"""A contender fails the frequency test when its G test's p-value is at or below this."""
CHECK_WEIGHT_RTOL = 1e-4
"""Largest relative error of an IS weight (the contenders hand back float32 weights, tianshou float64)."""
CHECK_ROWS = 256
"""Slots of a checked buffer (at least 32 per environment)."""
CHECK_FRAME = (8, 8)
"""Frame size of the checked Atari layout: every option a contender takes from the layout (stacks, dtypes,
next_of, stack_compress, save_only_last_obs, ignore_obs_next, optimize_memory_usage) is the full layout's, at
a fraction of the copying per draw."""
STRATIFIED_BELOW = 0.6
"""Batch dispersion below which a sampler's batches are called stratified (independent draws give about 1)."""
_MAX_PRIORITY_BATCHES = 4000
_FIELDS = ("obs", "next_obs", "action", "reward")


def check_layout(layout: Layout) -> Layout:
    """The layout a contender is checked on: ``layout`` itself, with frames of :data:`CHECK_FRAME`."""
    if layout.frame_stack == 1:
        return layout
    return replace(layout, obs_shape=(layout.frame_stack, *CHECK_FRAME))


def marked_td(rows: int) -> np.ndarray:
    """The TD error reported for each row: magnitudes spread over ``[10^-1.5, 10^1.5]`` (masses over a factor of
    63 at ``alpha = 0.6``), signs alternating, so that a contender must take ``|td|`` itself or be given it."""
    r = np.arange(rows)
    magnitude = 10.0 ** (3.0 * ((r * 0.6180339887498949) % 1.0) - 1.5)
    return np.where(r % 2 == 0, magnitude, -magnitude)


@dataclass
class CheckResult:
    """One contender's self-check in one (layout, N) cell."""

    contender: str
    layout: str
    num_envs: int
    kind: str
    passed: bool
    reason: str = ""
    """Every failure, in one line; empty when it passed."""
    rows: int = 0
    """Rows the contender may draw (its own rules)."""
    draws: int = 0
    """Rows drawn for the frequency test and the IS weights."""
    g: float | None = None
    """G statistic of the frequencies against ``priority^alpha / sum`` (uniform: ``1 / rows``)."""
    dof: int = 0
    p_value: float | None = None
    weight_error: float | None = None
    """Largest relative error of an IS weight (uniform: of a weight against 1); None where none is handed back."""
    dispersion: float | None = None
    """Variance of a row's count per batch over that of independent draws: about 1 for independent draws, well
    below for stratified batches."""
    batches: str = ""
    """``"independent"`` or ``"stratified"``, from the dispersion."""
    eps: float | None = None
    normalise: str | None = None
    differences: dict = field(default_factory=dict)
    """Named differences: what the contender does otherwise than the others, by name."""
    seen: dict = field(default_factory=dict)
    """How many of the ``checked`` draws showed each named difference of drawn rows."""
    checked: int = 0
    """Rows drawn in all, those that set the priorities included (every one's fields are checked)."""


class _Tally:
    """Checks drawn rows against the rows written: fields of one row, the row the index reported holds."""

    def __init__(self, pool: MarkedSteps, edges: dict[str, Edge]):
        self.pool = pool
        self.edges = {name: (np.isin(np.arange(pool.rows), e.rows), e) for name, e in edges.items()}
        self.seen = dict.fromkeys(edges, 0)
        self.problems: dict[str, list] = {}  # what -> [count, first example]
        self.draws = 0

    def _problem(self, what: str, mask: np.ndarray, example: str) -> None:
        count = int(mask.sum())
        if count:
            entry = self.problems.setdefault(what, [0, example])
            entry[0] += count

    def add(self, v: dict, locate, written: int, capacity: int) -> np.ndarray:
        """Tally one drawn batch; returns the row each drawn observation names (-1 where none)."""
        rows = self.pool.row_of(v["obs"])
        b = rows.shape[0]
        self.draws += b
        known = rows >= 0
        safe = np.where(known, rows, 0)
        if not known.all():
            self._problem("no row", ~known, f"first: batch position {int(np.argmax(~known))}")
        bad = {}
        for f in _FIELDS:
            got, want = np.asarray(v[f]), self.pool.written[f][safe]
            if got.shape != want.shape:
                self._problem(f"{f} shape", np.ones(b, bool), f"{f} of shape {got.shape[1:]}, written "
                                                              f"{want.shape[1:]}")  # fmt: skip
                bad[f] = np.zeros(b, bool)
                continue
            same = (got == want).reshape(b, -1).all(axis=1)
            bad[f] = known & ~same
        wrong = np.zeros(b, bool)
        for f in _FIELDS:
            wrong |= bad[f]
        explained = np.zeros(b, bool)
        for name, (member, edge) in self.edges.items():
            fits = known & member[safe]
            for f in _FIELDS:
                if f not in edge.fields:
                    fits &= ~bad[f]
            self.seen[name] += int((fits & wrong).sum())
            explained |= fits
        for f in _FIELDS:
            odd = bad[f] & ~explained
            if odd.any():
                first = int(rows[np.argmax(odd)])
                self._problem(f, odd, f"first: {self.pool.where(first)}")
        if locate is not None and v["indices"] is not None:
            idx = np.asarray(v["indices"]).astype(np.int64)
            outside = (idx < 0) | (idx >= capacity)
            self._problem("index", outside, f"index {int(idx[np.argmax(outside)])} outside [0, {capacity})")
            held = np.where(outside, -1, locate(np.where(outside, 0, idx), written))
            other = known & ~outside & (held != rows)
            if other.any():
                j = int(np.argmax(other))
                self._problem("other row", other, f"first: index {int(idx[j])} holds {self.pool.where(int(held[j]))}"
                                                  f", fields of {self.pool.where(int(rows[j]))}")  # fmt: skip
        return rows

    def reasons(self) -> list[str]:
        text = {
            "no row": "drawn obs that name no row written",
            "other row": "drawn rows whose fields are another row's than the index reported holds",
            "index": "reported indices outside the buffer",
            "obs": "drawn obs stacks other than the one written with their row",
            "next_obs": "drawn next_obs other than the one written with the row's obs",
            "action": "drawn actions other than the one written with the row's obs",
            "reward": "drawn rewards other than the one written with the row's obs",
        }
        return [f"{count:,} of {self.draws:,} {text.get(what, what)} ({example})"
                for what, (count, example) in self.problems.items()]  # fmt: skip


def check_contender(make: Callable[[int, Steps], Contender], layout: Layout, n: int, seed: int = 0,
                    draws: int | None = None) -> CheckResult:  # fmt: skip
    """Build a small instance of one contender with ``make(capacity, steps)`` and check what its own calls do.

    The buffer (:data:`CHECK_ROWS` slots, on :func:`check_layout` of ``layout``) is filled with
    :class:`MarkedSteps` and then half a ring more, so that it has wrapped, as in the timed steps.  Then:

    1. every drawn row's ``obs``, ``next_obs``, ``action`` and ``reward`` are those written as one
       row, and, where the contender reports indices, the row its index holds (on every draw below);
    2. a prioritized contender's priorities are set by its own draw and update calls, each drawn
       row given :func:`marked_td` of the row its obs names, until every row it may draw has been
       updated; ``draws`` rows (:data:`CHECK_DRAWS` by default) are then drawn (no update), and a
       G test compares each row's count with ``priority^alpha / sum`` over the rows it may draw
       (uniform: with ``1 / rows``), ``priority = |td| + eps`` with the contender's own ``eps``;
    3. the IS weights of a prioritized contender are ``(N P(i))^-beta`` over the largest of the
       buffer or of the batch (as the contender documents), within :data:`CHECK_WEIGHT_RTOL`; a
       uniform contender's weights, where it hands any back, are 1.

    Rows where the contender's own documented rules hand back other fields (:class:`Edge`) are
    counted as named differences, not failures.  NumPy's global generator (tianshou's and SB3's
    draws) is seeded with ``seed`` and restored afterwards.
    """
    draws = CHECK_DRAWS if draws is None else draws
    small = check_layout(layout)
    seg = max(32, -(-CHECK_ROWS // n))
    capacity, extra = seg * n, seg // 2
    pool = MarkedSteps(small, n, seg + extra)
    saved = np.random.get_state()  # noqa: NPY002  (the peers draw from NumPy's global generator)
    np.random.seed(seed)  # noqa: NPY002
    try:
        c = make(capacity, pool)
        result = CheckResult(c.name, layout.name, n, c.kind, passed=False)
        if c.probe is None:
            result.reason = "has no probe: its calls cannot be checked"
            return result
        _check(c, result, pool, capacity, extra, draws)
    finally:
        np.random.set_state(saved)  # noqa: NPY002
    return result


def _check(c: Contender, result: CheckResult, pool: MarkedSteps, capacity: int, extra: int, draws: int) -> None:
    from scipy.stats import chi2

    p = c.probe
    for _ in range(extra):
        p.add()
    written = pool.i
    allowed = np.asarray(p.sampleable(written), dtype=np.int64)
    in_set = np.zeros(pool.rows, dtype=bool)
    in_set[allowed] = True
    tally = _Tally(pool, p.edges(written))
    prioritized = c.kind == "per"
    reasons = []
    td = marked_td(pool.rows)
    result.rows, result.eps, result.normalise = int(allowed.size), (p.eps if prioritized else None), p.normalise
    if prioritized and p.normalise not in ("buffer", "batch"):
        reasons.append(f"is prioritized but names no IS normaliser ('buffer' or 'batch'), got {p.normalise!r}")
    if prioritized and p.update is None:
        reasons.append("is prioritized but has no update call")
    elif prioritized:
        updated = np.zeros(pool.rows, dtype=bool)
        for _ in range(_MAX_PRIORITY_BATCHES):
            batch = p.draw()
            rows = tally.add(p.view(batch), p.locate, written, capacity)
            p.update(batch, np.where(rows >= 0, td[np.maximum(rows, 0)], 1.0))
            updated[rows[rows >= 0]] = True
            if updated[allowed].all():
                break
        else:
            missing = int((~updated[allowed]).sum())
            reasons.append(f"{missing} of {allowed.size} rows it may draw were never drawn in "
                           f"{_MAX_PRIORITY_BATCHES:,} batches")  # fmt: skip
    mass = (np.abs(td) + p.eps) ** ALPHA if prioritized else np.ones(pool.rows)
    prob = mass[allowed] / mass[allowed].sum()
    least = mass[allowed].min()
    counts = np.zeros(pool.rows, dtype=np.int64)
    batches = -(-draws // BATCH)
    spread, weight_error, no_weights, misfit = 0.0, 0.0, False, ""
    for _ in range(batches):
        v = p.view(p.draw())
        named = tally.add(v, p.locate, written, capacity)
        if p.locate is not None and v["indices"] is not None:
            idx = np.asarray(v["indices"]).astype(np.int64)
            rows = np.where((idx >= 0) & (idx < capacity), p.locate(np.clip(idx, 0, capacity - 1), written), -1)
        else:  # no index reported: the row is the one its obs names
            rows = named
        rows = rows[rows >= 0]
        per_batch = np.bincount(rows, minlength=pool.rows)
        counts += per_batch
        spread += float(((per_batch[allowed] - rows.size * prob) ** 2).sum())
        w = v["weights"]
        if w is None:
            no_weights |= prioritized
            continue
        w = np.asarray(w, dtype=np.float64).reshape(-1)
        if w.shape[0] != rows.shape[0]:
            if w.shape[0] != len(v["obs"]):
                misfit = f"hands back {w.shape[0]} IS weights for a batch of {len(v['obs'])}"
            continue  # else rows without a place in the buffer: failed above
        if prioritized:
            m = mass[rows]
            want = (m / (least if p.normalise == "buffer" else m.min())) ** -BETA
            weight_error = max(weight_error, float(np.max(np.abs(w - want) / want)))
        else:
            weight_error = max(weight_error, float(np.max(np.abs(w - 1.0))))
    total = int(counts.sum())
    observed, expected = counts[allowed], total * prob
    seen = observed > 0
    g = 2.0 * float(np.sum(observed[seen] * np.log(observed[seen] / expected[seen])))
    dof = int(allowed.size) - 1
    p_value = float(chi2.sf(g, dof)) if dof > 0 else 1.0
    dispersion = spread / (batches * float(np.sum(BATCH * prob * (1 - prob)))) if dof > 0 else None
    result.draws, result.g, result.dof, result.p_value, result.dispersion = total, g, dof, p_value, dispersion
    result.weight_error = None if no_weights or v["weights"] is None else weight_error
    if dispersion is not None:
        result.batches = "stratified" if dispersion < STRATIFIED_BELOW else "independent"
    reasons += tally.reasons()
    outside = int(counts[~in_set].sum())
    if outside:
        first = int(np.nonzero(counts * ~in_set)[0][0])
        reasons.append(f"{outside:,} draws of rows it may not draw by its own rules (first: {pool.where(first)})")
    if p_value <= CHECK_LEVEL:
        law = f"priority^{ALPHA} / sum" if prioritized else "uniform"
        reasons.append(f"frequencies do not follow {law} (G = {g:,.0f} on {dof} dof, p = {p_value:.2g})")
    if misfit:
        reasons.append(misfit)
    if no_weights:
        reasons.append("hands back no IS weights")
    elif prioritized and weight_error > CHECK_WEIGHT_RTOL:
        reasons.append(f"IS weights differ from (N P(i))^-{BETA} over the {p.normalise}'s largest by up to "
                       f"{weight_error:.2g} (relative; tolerance {CHECK_WEIGHT_RTOL:g})")  # fmt: skip
    elif not prioritized and result.weight_error is not None and weight_error > CHECK_WEIGHT_RTOL:
        reasons.append(f"is uniform but hands back IS weights other than 1 (by up to {weight_error:.2g})")
    for name, count in tally.seen.items():
        if count:
            result.differences[name], result.seen[name] = tally.edges[name][1].what, count
    result.checked = tally.draws
    result.passed, result.reason = not reasons, "; ".join(reasons)


def makers(layout: Layout, n: int, peers: Iterable[str], device: str = "cpu") -> list[tuple[str, Callable]]:
    """Every contender of one cell, by name, each built by ``make(capacity, steps)``."""
    dev = {"device": device}
    return [
        ("prioritylab per", lambda cap, s: _prioritylab("per", layout, n, cap, s, **dev)),
        ("prioritylab uniform", lambda cap, s: _prioritylab("uniform", layout, n, cap, s, **dev)),
        # what a training run pays: the replay diagnostics the agents report (the peers compute none)
        ("prioritylab per +diagnostics",
         lambda cap, s: _prioritylab("per", layout, n, cap, s, diagnostics=True, **dev)),
        # the IS normaliser of the deep agents (the papers' code): the minibatch's largest weight, no min tree
        ("prioritylab per (batch IS)", lambda cap, s: _prioritylab("per", layout, n, cap, s, normalise="batch", **dev)),
    ] + [(p, lambda cap, s, p=p: PEER_BUILDERS[p](layout, n, cap, s, **dev)) for p in peers]  # fmt: skip


def self_check(layouts: Iterable[str] = tuple(LAYOUTS), num_envs: Iterable[int] = (1, 8),
               peers: Iterable[str] = PEERS, seed: int = 0, draws: int | None = None, device: str = "cpu",
               progress: bool = False) -> list[CheckResult]:  # fmt: skip
    """:func:`check_contender` for every contender of every (layout, N) cell, as :func:`run` would build them.

    A contender whose check raises fails with the error as its reason.  Within a cell, a
    prioritized contender whose batches are stratified where ``prioritylab per``'s are
    independent, or the reverse, gets that as a named difference (``"batches"``).
    """
    from tqdm.auto import tqdm

    peers, num_envs, out = list(peers), list(num_envs), []
    cells = [(name, n) for name in layouts for n in num_envs]
    with tqdm(total=len(cells) * (4 + len(peers)), disable=not progress, desc="self-check", unit="check") as bar:
        for name, n in cells:
            layout = LAYOUTS[name]
            cell = []
            for who, make in makers(check_layout(layout), n, peers, device):
                bar.set_postfix_str(f"{name}, N={n}: {who}")
                try:
                    res = check_contender(make, layout, n, seed=seed, draws=draws)
                except Exception as err:  # a peer's own error: reported as this contender's failure
                    first = (str(err).splitlines() or [""])[0]
                    res = CheckResult(who, name, n, "?", passed=False, reason=f"raised {type(err).__name__}: {first}")
                cell.append(res)
                bar.update(1)
            ours = next((r for r in cell if r.contender == "prioritylab per" and r.batches), None)
            for r in cell:
                if ours is not None and r.kind == "per" and r.batches and r.batches != ours.batches:
                    r.differences["batches"] = (f"draws the rows of a batch {_BATCH_WORDS[r.batches]} (prioritylab "
                                                f"per: {_BATCH_WORDS[ours.batches]}; dispersion {r.dispersion:.2f} "
                                                f"against {ours.dispersion:.2f})")  # fmt: skip
            out += cell
    return out


_BATCH_WORDS = {"independent": "independently", "stratified": f"one from each of {BATCH} equal slices of the "
                "total priority"}  # fmt: skip


def format_checks(checks: list[CheckResult]) -> str:
    """The self-check, one line a contender and cell, then each failure's reason and each named difference."""
    head = (f"{'layout':<7} {'N':>2} {'contender':<28} {'check':<6} {'rows':>5} {'draws':>8} {'G':>8} {'dof':>4} "
            f"{'p':>8} {'|w err|':>8} {'batches':<11}")  # fmt: skip
    title = (f"self-check: fields of every drawn row, frequencies against priority^{ALPHA} / sum (uniform: "
             f"1 / rows; G test, fails at p <= {CHECK_LEVEL:g}), IS weights (beta {BETA})")  # fmt: skip
    lines = [title, head, "-" * len(head)]
    for r in checks:
        g = "" if r.g is None else f"{r.g:,.0f}"
        p = "" if r.p_value is None else f"{r.p_value:.3f}"
        w = "" if r.weight_error is None else f"{r.weight_error:.1e}"
        lines.append(f"{r.layout:<7} {r.num_envs:>2} {r.contender:<28} {'ok' if r.passed else 'FAILED':<6} "
                     f"{r.rows:>5} {r.draws:>8,} {g:>8} {r.dof:>4} {p:>8} {w:>8} {r.batches:<11}")  # fmt: skip
    for r in checks:
        if not r.passed:
            lines.append(f"{r.contender} ({r.layout}, N={r.num_envs}) FAILED its self-check, no ratio: {r.reason}")
    differences: dict[tuple[str, str], list] = {}  # (contender, name) -> [what, cells]
    for r in checks:
        for name, what in r.differences.items():
            seen = f": {r.seen[name]:,} of {r.checked:,} draws" if name in r.seen else ""
            differences.setdefault((r.contender, name), [what, []])[1].append(f"{r.layout} N={r.num_envs}{seen}")
    for (who, name), (what, cells) in differences.items():
        lines.append(f"{who} differs ({name}): {what} [{', '.join(cells)}]")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------- runs


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
    from ..results import machine_info, package_versions
    from . import code

    versions = package_versions(("cpprb", "tianshou", "stable-baselines3", "torch"))
    return {
        "config": config,
        "skipped_peers": skipped,
        "machine": machine_info(),
        "load": machine_load,
        "packages": versions,
        **code(),
        "results": [asdict(r) for r in results],
        "self_check": [asdict(c) for c in checks or []],
        "memory_per_100k": memory_rows(results),
    }
