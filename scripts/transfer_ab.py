"""Host storage with one pinned copy per field against device-resident storage: time per sampled batch,
MuJoCo layout (17 float32 observations, 6 float32 actions).

A: the replay buffer as it is (:class:`prioritylab.replay.ReplayBuffer`, storage in host memory):
``sample(batch, device=device)`` draws, gathers into host arrays, then copies each field through pinned
memory to the device.

B: the same fields kept on the device (torch tensors there): the drawn indices are copied to the device,
and the batch is indexed there (``obs[i]``, ``obs[i + 1]``, ``action[i]``, ``reward[i]``, ``terminated[i]``).
B leaves out what the buffer's gather does beyond that (episode ends, n-step returns), so it is a lower
bound on a device-resident gather.

Both draw their indices with the same uniform sampler; each timed batch ends with a device synchronisation
(on CUDA).  Usage::

    python scripts/transfer_ab.py --device cuda --json transfer_ab.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch

from prioritylab.replay import ReplayBuffer
from prioritylab.samplers import make_sampler

OBS, ACT = 17, 6


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


def measure(device: str, batch: int, capacity: int, n: int, repeats: int, seed: int = 0) -> dict:
    dev = torch.device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    buf = filled_buffer(capacity, seed)
    st = buf.storage
    frames = torch.from_numpy(np.ascontiguousarray(st["obs"])).to(dev)
    action = torch.from_numpy(np.ascontiguousarray(st["action"])).to(dev)
    reward = torch.from_numpy(np.ascontiguousarray(st["reward"])).to(dev)
    term = torch.from_numpy(np.ascontiguousarray(st["terminated"])).to(dev)
    cap = buf.capacity

    def host_storage():
        return buf.sample(batch, device=dev)

    def device_storage():
        drawn = buf.sampler.sample(batch, None)
        i = torch.from_numpy(drawn.indices).to(dev, non_blocking=False)
        return frames[i], frames[(i + 1) % cap], action[i], reward[i], term[i]

    def draw_and_gather_only():
        return buf.gather(buf.sampler.sample(batch, None).indices)

    a = timed(host_storage, sync, n, repeats)
    b = timed(device_storage, sync, n, repeats)
    g = timed(draw_and_gather_only, sync, n, repeats)
    return {"layout": "mujoco", "device": str(dev), "batch": batch, "capacity": cap,
            "host_storage_us": 1e6 * a, "device_storage_us": 1e6 * b, "draw_and_host_gather_us": 1e6 * g,
            "host_copy_share_of_A": (a - g) / a}  # fmt: skip


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--batches", type=int, nargs="+", default=[256], help="batch sizes (default: 256)")
    p.add_argument("--capacity", type=int, default=10**6, help="slots (default: 10^6)")
    p.add_argument("--calls", type=int, default=500, help="timed batches per repeat (default: 500)")
    p.add_argument("--repeats", type=int, default=5, help="repeats; the median is reported (default: 5)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: 1, as the agents)")
    p.add_argument("--json", default=None, help="also write the rows as JSON here")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.device(args.device)  # a bad name fails here, before any buffer is filled
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        p.error(f"device {args.device!r} asked for, but CUDA is not available here")
    rows = []
    for batch in args.batches:
        rows.append(r := measure(args.device, batch, args.capacity, args.calls, args.repeats))
        a, b = r["host_storage_us"], r["device_storage_us"]
        print(f"batch {batch:>4} on {r['device']}: A host storage {a:8.1f} us, B device storage {b:8.1f} us "
              f"(B/A {b / a:.2f}); draw + host gather alone {r['draw_and_host_gather_us']:.1f} us")  # fmt: skip
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
