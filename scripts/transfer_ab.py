"""Host storage with one copy per field against device-resident storage: time per sampled batch,
MuJoCo layout (17 float32 observations, 6 float32 actions).

A: the replay buffer as it is (:class:`prioritylab.replay.ReplayBuffer`, storage in host memory):
``sample(batch, device=device)`` draws, gathers into host arrays, then copies each field to the device.

B: the same fields kept on the device (torch tensors there): the drawn indices are copied to the device,
and the batch is indexed there (``obs[i]``, ``obs[i + 1]``, ``action[i]``, ``reward[i]``, ``terminated[i]``).
B leaves out what the buffer's gather does beyond that (episode ends, n-step returns), so it is a lower
bound on a device-resident gather.

Both draw their indices with the same uniform sampler.  Each repeat times ``--calls`` batches and ends
with a device synchronisation (on CUDA), so asynchronous copies may overlap from one batch to the next
within a repeat, which favours them.

``--copies``: only the copy of one gathered batch to the device (no buffer, no draw), three ways, for the
MuJoCo batch (256 transitions) and the Atari batch (32 stacks of 4 84x84 frames):

* ``pinned per field``: each field copied into fresh pinned memory, then an asynchronous transfer (the
  buffer's copy before this comparison);
* ``pageable per field``: each field's array copied to the device as it is (the buffer's copy now, and
  SB3's way);
* ``one staging copy``: every field written into one persistent pinned buffer, one transfer, and the
  fields taken as views of the device copy.

Usage::

    python scripts/transfer_ab.py --device cuda --json transfer_ab.json
    python scripts/transfer_ab.py --device cuda --copies
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from prioritylab import _checks
from prioritylab._cli import Parser, check_not_empty, check_output_file, missing_dirs, remove_empty_dirs
from prioritylab.deep.run import SettingsError, pick_device
from prioritylab.replay import ReplayBuffer, estimate_bytes, least_slots
from prioritylab.replay.buffer import SAMPLER_BYTES_PER_SLOT
from prioritylab.samplers import make_sampler

OBS, ACT = 17, 6
LARGEST = 2**62  # the largest --capacity and batch size taken; the memory check refuses far less on any machine
ROW = 2 * 4 * OBS + 4 * ACT + 8 + 3 * 4  # a sampled row: observation and next one, action, index, three scalars


def memory_need(capacity: int, batch: int) -> tuple[int, int]:
    """``(bytes, bytes)`` that ``--capacity`` and the largest of ``--batches`` need at least in host memory: the
    buffer's storage (the replay's formula without its sampler and diagnostics, which take more) with the arrays it
    is filled from, and a batch's rows, gathered by A and indexed by B.  B's fields share the buffer's memory on the
    CPU and are the device's elsewhere."""
    storage = estimate_bytes(capacity, (OBS,), np.float32, (ACT,), np.float32, diagnostics=False)
    fill = capacity * (4 * OBS + 4 * ACT + 8) + 4 * OBS
    return storage - SAMPLER_BYTES_PER_SLOT * capacity + fill, 2 * batch * ROW


def check_sizes(capacity: int, batches: list[int]) -> None:
    """``ValueError`` naming the first size this script cannot run, before any buffer is filled."""
    least = least_slots(1, 1)
    if not least <= capacity <= LARGEST:
        raise ValueError(f"--capacity must be in [{least}, 2^62] (a replay needs n_step + frame_stack + 2 slots), "
                         f"got {capacity}")  # fmt: skip
    bad = [b for b in batches if not 1 <= b <= LARGEST]
    if bad:
        raise ValueError(f"--batches must each be in [1, 2^62], got {bad[0]}")
    have = _checks.available_bytes()
    buffer, batch = memory_need(capacity, max(batches))
    if have is None:  # pragma: no cover - not Linux
        return
    size = _checks.size_text
    if buffer > have:
        raise ValueError(f"--capacity {capacity:,}: the buffer's storage and the arrays it is filled from need at "
                         f"least {size(buffer)} but only {size(have)} of memory is available")  # fmt: skip
    if buffer + batch > have:
        raise ValueError(f"--batches {max(batches):,}: a batch needs at least {size(batch)} beside the buffer's "
                         f"{size(buffer)} but only {size(have)} of memory is available")  # fmt: skip


def filled_buffer(capacity: int, seed: int) -> ReplayBuffer:
    """A buffer of ``capacity`` slots, full, one environment."""
    buf = ReplayBuffer(capacity, (OBS,), (ACT,), sampler=make_sampler("uniform", capacity, seed=seed))
    rng = np.random.default_rng(seed)
    obs = rng.standard_normal((capacity + 1, OBS)).astype(np.float32)
    act = rng.uniform(-1, 1, (capacity, ACT)).astype(np.float32)
    reward = rng.standard_normal(capacity)
    no = np.zeros(1, bool)
    for t in range(capacity):
        buf.add(obs[t : t + 1], act[t : t + 1], reward[t : t + 1], obs[t + 1 : t + 2], no, no)
    return buf


def timed(call, sync, n: int, repeats: int) -> float:
    """Median over ``repeats`` of the seconds per call, over ``n`` calls each."""
    for _ in range(10):
        call()
    sync()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            call()
        sync()
        out.append((time.perf_counter() - t0) / n)
    return statistics.median(out)


class DeviceStorage:
    """B: the buffer's stored fields copied once to the device; a batch is indexed there."""

    def __init__(self, buf: ReplayBuffer, device: torch.device):
        st, self.device, self.capacity = buf.storage, device, buf.capacity
        fields = ("obs", "action", "reward", "terminated")
        self.frames, self.action, self.reward, self.terminated = (
            torch.from_numpy(np.ascontiguousarray(st[k])).to(device) for k in fields)

    def batch(self, indices: np.ndarray) -> tuple:
        """Observations, next slots' observations, actions, rewards and terminal flags of ``indices``."""
        i = torch.from_numpy(indices).to(self.device)
        return self.frames[i], self.frames[(i + 1) % self.capacity], self.action[i], self.reward[i], self.terminated[i]


def measure(device: str, batch: int, capacity: int, n: int, repeats: int, seed: int = 0) -> dict:
    dev = torch.device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    buf = filled_buffer(capacity, seed)
    stored = DeviceStorage(buf, dev)

    def host_storage():
        return buf.sample(batch, device=dev)

    def device_storage():
        return stored.batch(buf.sampler.sample(batch, None).indices)

    def draw_and_gather_only():
        return buf.gather(buf.sampler.sample(batch, None).indices)

    a = timed(host_storage, sync, n, repeats)
    b = timed(device_storage, sync, n, repeats)
    g = timed(draw_and_gather_only, sync, n, repeats)
    return {"layout": "mujoco", "device": str(dev), "batch": batch, "capacity": buf.capacity,
            "host_storage_us": 1e6 * a, "device_storage_us": 1e6 * b, "draw_and_host_gather_us": 1e6 * g,
            "host_copy_share_of_A": (a - g) / a}  # fmt: skip


BATCHES = {  # the fields a sample hands over: name -> (shape, dtype)
    "mujoco": {"obs": ((256, OBS), np.float32), "action": ((256, ACT), np.float32), "reward": ((256,), np.float32),
               "next_obs": ((256, OBS), np.float32), "discount": ((256,), np.float32),
               "weights": ((256,), np.float32)},
    "atari": {"obs": ((32, 4, 84, 84), np.uint8), "action": ((32,), np.int64), "reward": ((32,), np.float32),
              "next_obs": ((32, 4, 84, 84), np.uint8), "discount": ((32,), np.float32),
              "weights": ((32,), np.float32)},
}  # fmt: skip


class Staging:
    """One persistent pinned buffer holding every field at 8-byte-aligned offsets: one transfer per batch.

    As timed here, a call may overwrite the buffer while the previous call's transfer still reads it; a
    buffer that used it would have to wait for that transfer (an event) first.
    """

    def __init__(self, fields: dict, device: torch.device):
        self.device, self.slots, offset = device, {}, 0
        for name, (shape, dtype) in fields.items():
            nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
            self.slots[name] = (offset, nbytes, shape, dtype)
            offset += -(-nbytes // 8) * 8
        self.host = torch.empty(offset, dtype=torch.uint8, pin_memory=device.type == "cuda")
        self.host_np = self.host.numpy()

    def copy(self, arrays: dict) -> dict:
        for name, (offset, nbytes, _, _) in self.slots.items():
            self.host_np[offset : offset + nbytes] = arrays[name].reshape(-1).view(np.uint8)
        dev = self.host.to(self.device, non_blocking=True)
        return {name: dev[o : o + n].view(torch.from_numpy(np.empty(0, dt)).dtype).view(shape)
                for name, (o, n, shape, dt) in self.slots.items()}  # fmt: skip


def copy_strategies(layout: str, device: str, n: int, repeats: int, seed: int = 0) -> dict:
    """Seconds per batch of each way to copy one gathered batch to ``device``; each way's result is checked."""
    from prioritylab.replay.buffer import _to_device

    dev = torch.device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    rng = np.random.default_rng(seed)
    arrays = {k: (rng.integers(0, 256, shape).astype(dt) if dt != np.float32 else rng.standard_normal(shape).astype(dt))
              for k, (shape, dt) in BATCHES[layout].items()}  # fmt: skip
    staging = Staging(BATCHES[layout], dev)

    def pinned(arr):  # page-locked memory exists only beside a CUDA device
        t = torch.from_numpy(arr)
        return t.pin_memory() if dev.type == "cuda" else t

    ways = {
        "pinned per field": lambda: {k: pinned(v).to(dev, non_blocking=True) for k, v in arrays.items()},
        "pageable per field": lambda: {k: _to_device(v, dev) for k, v in arrays.items()},
        "one staging copy": lambda: staging.copy(arrays),
    }
    row = {"layout": layout, "device": str(dev), "bytes": sum(v.nbytes for v in arrays.values())}
    for name, way in ways.items():
        out = way()
        sync()
        for k, v in arrays.items():  # the same function of the batch, whichever way
            if not np.array_equal(out[k].cpu().numpy(), v):
                raise AssertionError(f"{name}: field {k} differs from the host array")
        row[f"{name} us"] = 1e6 * timed(way, sync, n, repeats)
    return row


def main(argv=None) -> int:
    p = Parser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                   help="torch device: cpu, cuda, cuda:1, ..., or auto (default: cuda where there is one, "
                        "else cpu)")  # fmt: skip
    p.add_argument("--batches", type=int, nargs="+", default=[256], help="batch sizes (default: 256)")
    p.add_argument("--capacity", type=int, default=10**6, help="slots (default: 10^6)")
    p.add_argument("--calls", type=int, default=500, help="timed batches per repeat (default: 500)")
    p.add_argument("--repeats", type=int, default=5, help="repeats; the median is reported (default: 5)")
    p.add_argument("--copies", action="store_true", help="time only the three ways to copy a batch (see above)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: 1, as the agents)")
    p.add_argument("--json", default=None, metavar="PATH", help="also write the rows as JSON here")
    args = p.parse_args(argv)
    for name in ("calls", "repeats"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    try:  # a bad or absent device fails here, before any buffer is filled
        if not 1 <= args.threads <= 4096:
            raise ValueError(f"--threads must be in [1, 4096], got {args.threads}")
        args.device = str(pick_device(args.device))
        if not args.copies:  # --copies fills no buffer and times its own two batches
            check_sizes(args.capacity, args.batches)
    except (SettingsError, ValueError) as err:
        p.error(str(err))
    made = missing_dirs(Path(args.json).parent) if args.json else []
    try:  # the last check, before any timing: a folder it makes is taken back, while empty, if the command stops
        if args.json is not None:
            check_not_empty(args.json, "--json", "a file")
            check_output_file(args.json, "--json")
    except ValueError as err:
        remove_empty_dirs(made)
        p.error(str(err))
    try:
        torch.set_num_threads(args.threads)
        rows = _run(args)
        if args.json is not None:
            with open(args.json, "w") as fh:
                json.dump(rows, fh, indent=1)
    except BaseException:
        remove_empty_dirs(made)
        raise
    return 0


def _run(args) -> list[dict]:
    """The rows of the timings ``args`` ask for, each printed as it is taken."""
    rows = []
    if args.copies:
        for layout in BATCHES:
            rows.append(r := copy_strategies(layout, args.device, args.calls, args.repeats))
            print(f"{layout:<6} {r['bytes']:>9,} bytes on {r['device']}: "
                  + ", ".join(f"{k} {v:.1f}" for k, v in r.items() if k.endswith(" us")))  # fmt: skip
        args.batches = []
    for batch in args.batches:
        rows.append(r := measure(args.device, batch, args.capacity, args.calls, args.repeats))
        a, b = r["host_storage_us"], r["device_storage_us"]
        print(f"batch {batch:>4} on {r['device']}: A host storage {a:8.1f} us, B device storage {b:8.1f} us "
              f"(B/A {b / a:.2f}); draw + host gather alone {r['draw_and_host_gather_us']:.1f} us")  # fmt: skip
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
