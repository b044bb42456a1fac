"""Smoke test of ``prioritylab bench replay --quick`` with prioritylab alone.

Peer libraries are not installed in the test environment, and nothing is
timed here: the timing loop is replaced by a stub that runs each step a few
times, so the test checks that every step runs and that the tables and JSON
come out, never how fast anything is.
"""

import json

import numpy as np
import pytest

from prioritylab.bench import replay as bench
from prioritylab.cli import main


@pytest.fixture
def untimed(monkeypatch):
    calls = {}

    def fake_measure(step, seconds, warmup=3):
        for _ in range(3):
            step()
        calls[step] = calls.get(step, 0) + 3
        return 1.0

    monkeypatch.setattr(bench, "measure", fake_measure)
    return calls


def test_quick_run_without_peers(untimed, tmp_path, capsys):
    path = tmp_path / "replay.json"
    assert main(["bench", "replay", "--quick", "--peers", "--no-progress", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "prioritylab per" in out and "prioritylab uniform" in out and "memory per 100,000" in out
    doc = json.loads(path.read_text())
    cells = {(r["layout"], r["num_envs"], r["contender"]) for r in doc["results"]}
    kinds = ("per", "uniform", "per +diagnostics", "per (batch IS)")
    assert cells == {(layout, n, f"prioritylab {k}") for layout in ("mujoco", "atari") for n in (1, 8) for k in kinds}
    assert all(r["ratio"] is None for r in doc["results"])  # no peer, no ratio
    assert doc["config"]["peers"] == []
    assert len(untimed) == 16  # every cell's steps ran
    # the conditions of the figures: torch's threads (SB3's batch copy runs on them), the load and the code
    assert doc["config"]["threads"] == 1 and doc["load"]["torch_threads"] == 1
    assert len(doc["load"]["before"]["loadavg_1_5_15"]) == 3 and "git_dirty" in doc and "git_commit" in doc
    assert "torch threads 1; load average (1 min)" in out


def test_the_torch_thread_count_is_the_one_asked_for(untimed, tmp_path):
    import torch

    path = tmp_path / "replay.json"
    before = torch.get_num_threads()
    try:
        assert main(["bench", "replay", "--quick", "--peers", "--no-progress", "--threads", "2", "--json",
                     str(path)]) == 0  # fmt: skip
        assert json.loads(path.read_text())["load"]["torch_threads"] == 2 == torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def test_step_returns_torch_batches_and_memory_matches_formula(untimed):
    import numpy as np
    import torch

    layout = bench.LAYOUTS["atari"]
    contenders = bench.build(layout, 2, 256, peers=[])
    per = next(c for c in contenders if c.name == "prioritylab per")
    with_diagnostics = next(c for c in contenders if c.name == "prioritylab per +diagnostics")
    assert with_diagnostics.step().obs.shape == (bench.BATCH, 4, 84, 84)
    batch = per.step()
    assert isinstance(batch.obs, torch.Tensor) and batch.obs.shape == (bench.BATCH, 4, 84, 84)
    assert batch.obs.dtype == torch.uint8 and batch.weights.dtype == torch.float32
    assert np.all(batch.weights.numpy() <= 1.0)
    formula = bench.estimate_bytes(256, layout.obs_shape, layout.obs_dtype, layout.action_shape, layout.action_dtype, 4)
    assert abs(per.memory_bytes - formula) / formula < 0.05
    rows = bench.memory_rows(bench._cell_results(layout, 2, 256, contenders, {c.name: [1.0] for c in contenders}))
    assert [r["contender"] for r in rows] == [c.name for c in contenders]  # one row per contender, peers none
    assert all(r["reported"] * 7 <= r["stacked_obs_and_next_obs"] for r in rows)


def test_transfer_ab_script_times_both_storages_and_the_device_copy_holds_the_buffers_rows(tmp_path):
    """scripts/transfer_ab.py on the CPU: both paths and the copy ways timed; B's batch is the buffer's own."""
    import torch
    from theory_scripts import load_script

    script = load_script("transfer_ab")
    path = tmp_path / "ab.json"
    assert script.main(["--device", "cpu", "--capacity", "512", "--calls", "5", "--repeats", "1",
                        "--batches", "16", "--json", str(path)]) == 0  # fmt: skip
    (row,) = json.loads(path.read_text())
    assert row["batch"] == 16 and row["capacity"] == 512
    assert row["host_storage_us"] > 0 and row["device_storage_us"] > 0 and row["draw_and_host_gather_us"] > 0
    buf = script.filled_buffer(64, seed=3)
    idx = np.arange(0, 62, 3)  # slots whose next slot holds the next observation (no wrap, no episode end)
    host = buf.gather(idx)
    obs, next_obs, action, reward, terminated = script.DeviceStorage(buf, torch.device("cpu")).batch(idx)
    assert torch.equal(obs, torch.from_numpy(host["obs"])) and torch.equal(next_obs, torch.from_numpy(host["next_obs"]))
    assert torch.equal(action, torch.from_numpy(host["action"]))
    assert torch.equal(reward, torch.from_numpy(host["reward"])) and not terminated.any()
    rows = [script.copy_strategies(layout, "cpu", n=2, repeats=1) for layout in script.BATCHES]
    for r in rows:  # each way's result is checked against the host arrays inside copy_strategies
        assert {"pinned per field us", "pageable per field us", "one staging copy us"} <= set(r)


@pytest.mark.parametrize(("args", "message"), [(["--calls", "0"], "--calls must be at least 1, got 0"),
                                               (["--batches", "0"], "--batches must each be at least 1, got 0")])
def test_transfer_ab_refuses_a_zero_count_in_one_line(capsys, args, message):
    from theory_scripts import load_script

    with pytest.raises(SystemExit) as stop:
        load_script("transfer_ab").main(["--device", "cpu", *args])
    assert stop.value.code == 2 and capsys.readouterr().err.strip().splitlines()[-1].endswith(message)


def test_a_resident_set_that_did_not_grow_is_not_printed_as_a_size():
    """The RSS column is the growth of the process's resident set while a buffer was built: a build that reused
    memory freed before it shows no growth, which is not a size of 0 MB."""
    def result(rss):
        return bench.Result("atari", 8, 2**10, "prioritylab per", True, 1.0, [1.0], rss_bytes=rss,
                            memory_bytes=7_185 * 2**10)  # fmt: skip

    rows = bench.format_memory([result(0), result(-4096), result(4096), result(7_200 * 2**10)]).splitlines()[3:]
    assert [row.split()[4] for row in rows] == ["—", "—", "<1", "720"]
