"""Benchmark harness smoke tests, the NumPy peer tree, and the speed-motivated kernel paths.

The kernels' fast paths (level-by-level updates, the merged top levels of a
stratified descent, the fused IS weights, the aligned allocation) are checked
here against plain formulations; the drift check runs 10^6 updates by default
and 10^8 behind ``-m slow``.
"""

import json
import math
import sys

import numpy as np
import pytest

from prioritylab import SumTree
from prioritylab.bench import load
from prioritylab.bench import sumtree as bench
from prioritylab.bench.numpy_tree import NumpySumTree
from prioritylab.cli import main
from prioritylab.samplers import is_weights
from prioritylab.sumtree import FANOUT, tree_alloc, tree_descend, tree_rebuild, tree_sample, tree_sample_is

# ------------------------------------------------------------------------------------------ harness


def test_run_smoke_with_available_peers():
    peers, skipped = bench.available_peers()
    results = bench.run([64], [1, 8], seconds=0.005, repeats=1, peers=peers, progress=False)
    names = {r.contender for r in results}
    ours = {"prioritylab", "prioritylab+min", "prioritylab+minmax", "prioritylab (jitted)", "prioritylab (batch IS)"}
    assert ours <= names
    assert names - ours == set(peers)
    cells = {(r.batch, r.op) for r in results}
    assert cells == {(k, op) for k in (1, 8) for op in ("update", "sample", "per-step")}
    assert all(r.calls_per_s > 0 and r.items_per_s == r.calls_per_s * r.batch for r in results)
    assert not any(r.contender == "prioritylab (jitted)" and r.batch != 1 for r in results)
    for r in results:
        if r.contender.endswith("(jitted)"):
            assert r.ratio is None
        elif peers and (r.op != "per-step" or set(peers) - {"numpy"}):
            assert r.ratio is not None and r.ratio > 0
    table = bench.format_table(results)
    assert "prioritylab" in table and "2^6" in table
    doc = bench.to_json(results, {"capacities": [64]}, skipped, {"before": load(), "after": load()})
    doc = json.loads(json.dumps(doc, default=str))
    assert doc["results"][0]["capacity"] == 64 and "git_dirty" in doc
    assert len(doc["load"]["after"]["loadavg_1_5_15"]) == 3


def test_best_peer_has_ratio_one():
    peers, _ = bench.available_peers(["numpy"])
    results = bench.run([32], [4], seconds=0.005, repeats=2, peers=peers, ops=["sample"], progress=False)
    numpy_row = next(r for r in results if r.contender == "numpy")
    assert numpy_row.ratio == 1.0 and len(numpy_row.rates) == 2


def test_missing_peer_is_skipped(monkeypatch):
    monkeypatch.setitem(sys.modules, "cpprb", None)  # makes `import cpprb` raise ImportError
    peers, skipped = bench.available_peers(["cpprb", "numpy"])
    assert peers == ["numpy"] and "cpprb" in skipped


def test_a_peer_that_breaks_on_import_is_skipped_with_its_error_and_an_unknown_one_is_refused(monkeypatch, tmp_path):
    """Every benchmark finds its peers through ``bench.importable``: any error an import raises skips that peer,
    named with the error's type, and the other peers are kept."""
    from prioritylab.bench import importable

    (tmp_path / "broken_peer.py").write_text("raise AttributeError('module numpy has no attribute float_')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ok, skipped = importable(["broken", "numpy"], {"broken": ("json", "broken_peer"), "numpy": ()})
    assert ok == ["numpy"] and skipped == {"broken": "AttributeError: module numpy has no attribute float_"}
    with pytest.raises(ValueError, match="unknown peer 'cprb'; known: broken, numpy"):
        importable(["cprb"], {"broken": (), "numpy": ()})


def test_cli_writes_json(tmp_path, capsys):
    path = tmp_path / "bench.json"
    argv = ["bench", "sumtree", "--capacities", "2^6", "--batches", "1", "4", "--seconds", "0.005", "--repeats", "1",
            "--peers", "numpy", "--ops", "update", "sample", "--no-progress", "--json", str(path)]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "numpy" in out and "vs best peer" in out
    doc = json.loads(path.read_text())
    assert doc["config"]["capacities"] == [64] and doc["config"]["peers"] == ["numpy"]
    assert {r["op"] for r in doc["results"]} == {"update", "sample"}


@pytest.mark.parametrize(("option", "value", "message"),
                         [("--capacities", "0", "size must be positive, got '0'"),
                          ("--batches", "two", "not a size: 'two'"),
                          ("--batches", "-4", "size must be positive, got '-4'")])  # fmt: skip
def test_cli_rejects_bad_sizes(option, value, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "sumtree", option, value])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}: {message}" in err and len(err.strip().splitlines()[-1]) < 200


def test_bench_sumtree_refuses_a_capacity_whose_trees_cannot_fit_before_any_work(tmp_path, capsys, monkeypatch):
    from prioritylab import _checks
    from prioritylab.bench import sumtree as bench

    monkeypatch.setattr(_checks, "available_bytes", lambda: 32 * 2**16 - 1)
    monkeypatch.setattr(bench, "run", lambda *a, **k: pytest.fail("the benchmark ran"))
    path = tmp_path / "bench.json"
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "sumtree", "--quick", "--capacities", "2^10", "2^16", "--json", str(path)])
    assert exit_info.value.code == 2 and not path.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--capacities 65,536: its trees alone need at least" in err[0]


@pytest.mark.parametrize("bench_name", ["sumtree", "replay"])
@pytest.mark.parametrize("value", ["inf", "nan", "-1", "abc"])
def test_cli_refuses_seconds_that_are_not_a_finite_positive_number(bench_name, value, capsys, monkeypatch):
    """``--seconds inf`` would time one cell for ever; the message names the option's kind, not a function."""
    from prioritylab.bench import replay_check

    monkeypatch.setattr(bench, "run", lambda *a, **k: pytest.fail("the benchmark ran"))
    monkeypatch.setattr(replay_check, "self_check", lambda *a, **k: pytest.fail("the benchmark ran"))
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", bench_name, "--seconds", value])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and err == [f"prioritylab bench {bench_name}: error: argument --seconds: must be "
                                                 f"a finite number of seconds above 0, got {value!r}"]  # fmt: skip


@pytest.mark.parametrize(("argv", "message"), [
    (["sumtree", "--capacities", "2^63"], "argument --capacities: size must be at most 2^62, got '2^63'"),
    (["sumtree", "--batches", "9^999999999"], "argument --batches: size must be at most 2^62, got '9^999999999'"),
    (["sumtree", "--batches", "1" + "0" * 5000], "argument --batches: size must be at most 2^62, got '100"),
    (["agent", "--buffer-size", "10**20"], "argument --buffer-size: size must be at most 2^62, got '10**20'"),
    (["agent", "--threads", "4097"], "argument --threads: must be at most 4096 threads, got '4097'"),
    (["replay", "--threads", "10**6"], "argument --threads: must be at most 4096 threads, got '10**6'"),
])  # fmt: skip
def test_cli_refuses_a_size_past_its_bound_when_parsing(argv, message, capsys, monkeypatch):
    """A size is an int64 count: one past 2^62 is refused before it is computed (9^999999999 would take minutes)."""
    from prioritylab.bench import agent as bench_agent
    from prioritylab.bench import replay_check

    for module, name in ((bench, "run"), (bench_agent, "build"), (replay_check, "self_check")):
        monkeypatch.setattr(module, name, lambda *a, **k: pytest.fail("the benchmark ran"))
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(err) == 1 and message in err[0]


@pytest.mark.parametrize(("args", "message"), [
    (["--buffer-size", "3"], "--buffer-size 3: td3's replay needs at least 4 slots (n_step + frame_stack + 2)"),
    (["--agents", "dqn", "--atari-buffer-size", "6"],
     "--atari-buffer-size 6: dqn's replay needs at least 7 slots (n_step + frame_stack + 2)"),
    (["--buffer-size", "10**15"], "--buffer-size 1,000,000,000,000,000: a replay of 1,000,000,000,000,000 slots needs "
                                  "at least"),
    (["--batch", "10**12"], "--batch 1,000,000,000,000: a batch needs at least"),
    (["--agents", "dqn", "--atari-batch", "10**9"], "--atari-batch 1,000,000,000: a batch needs at least"),
    (["--hidden", "10**6"], "--hidden 1,000,000: the networks of 7 contenders need at least"),
    (["--hidden", "2**40"], "--hidden 1,099,511,627,776: td3's networks are too large to build"),
])  # fmt: skip
def test_bench_agent_refuses_sizes_it_cannot_hold_before_any_work(args, message, tmp_path, capsys, monkeypatch):
    """Below the replay's least size, or past the memory available (at least: the replay by its formula, the
    networks' weights, a batch), a size is one line before anything is built, and --json's folder is not made."""
    from prioritylab import _checks
    from prioritylab.bench import agent as bench_agent

    monkeypatch.setattr(_checks, "available_bytes", lambda: 8 * 2**30)
    monkeypatch.setattr(bench_agent, "build", lambda *a, **k: pytest.fail("a contender was built"))
    path = tmp_path / "new" / "bench.json"
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "agent", "--quick", "--peers", "--no-progress", "--json", str(path), *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(err) == 1 and message in err[0], err
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize(("argv", "message"), [
    (["--quick", "--layouts", "atari", "--envs", "1", "147"],
     "--envs 147: the atari buffer's 1,024 slots give 6 an environment, fewer than the 7 a replay needs"),
    (["--check-only", "--layouts", "atari", "--envs", "257"],
     "--envs 257: the self-check marks the atari frames of at most 256 environments"),
    (["--quick", "--layouts", "mujoco", "--envs", "1000"], "--envs 1,000: the contenders' pre-made steps need at "
                                                           "least"),
])  # fmt: skip
def test_bench_replay_refuses_more_environments_than_its_buffers_hold_before_any_work(argv, message, tmp_path,
                                                                                      capsys, monkeypatch):  # fmt: skip
    from prioritylab import _checks
    from prioritylab.bench import replay_check

    monkeypatch.setattr(_checks, "available_bytes", lambda: 2**20)
    monkeypatch.setattr(replay_check, "self_check", lambda *a, **k: pytest.fail("a contender was checked"))
    path = tmp_path / "new" / "bench.json"
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "replay", "--no-progress", "--json", str(path), *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(err) == 1 and message in err[0], err
    assert not (tmp_path / "new").exists()


def test_a_refusal_after_the_json_check_takes_back_the_folders_it_made(tmp_path, capsys, monkeypatch):
    """``--json PATH``'s folder is made when it is checked, the last check; a command that then stops (a setting
    the agents refuse while built, an error, Ctrl-C) leaves no empty folder behind, and one it wrote into stays."""
    from prioritylab.bench import agent as bench_agent
    from prioritylab.deep.run import SettingsError

    def refused(*args, **kwargs):
        assert (tmp_path / "new" / "deeper").is_dir()  # made by the check, before the build
        raise SettingsError("a setting refused while the contenders are built")

    monkeypatch.setattr(bench_agent, "build", refused)
    path = tmp_path / "new" / "deeper" / "bench.json"
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "agent", "--quick", "--peers", "--no-progress", "--json", str(path)])
    assert exit_info.value.code == 2 and not (tmp_path / "new").exists()
    assert capsys.readouterr().err.strip() == ("prioritylab bench agent: error: a setting refused while the "
                                               "contenders are built")  # fmt: skip
    with pytest.raises(SystemExit):
        main(["bench", "sumtree", "--json", ""])
    assert capsys.readouterr().err.strip() == "prioritylab bench sumtree: error: --json is empty; give a file"


@pytest.mark.parametrize(("args", "message"),
                         [(["--env", "Hoper-v5"], "unknown environment 'Hoper-v5'"),
                          (["--env", "CartPole-v1"], "needs a continuous (Box) action space"),
                          (["--agents", "dqn", "--atari-env", "ALE/Pongg-v5"],
                           "unknown Atari game 'ALE/Pongg-v5'")])  # fmt: skip
def test_bench_agent_refuses_an_environment_its_agents_cannot_take_in_one_line(args, message, tmp_path, capsys):
    path = tmp_path / "bench.json"
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "agent", "--quick", "--peers", "--no-progress", "--json", str(path), *args])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and not path.exists()


@pytest.mark.parametrize("bench_name", ["agent", "replay"])
@pytest.mark.parametrize(("device", "message"), [("gpu", "device 'gpu' is not a torch device"),
                                                 ("cuda:7", "device 'cuda:7' asked for")])  # fmt: skip
def test_cli_rejects_a_device_before_any_work(bench_name, device, message, tmp_path, capsys):
    """A bad or absent ``--device`` is one line on stderr, exit 2, before any contender is built or file written."""
    import torch

    if device.startswith("cuda") and torch.cuda.device_count() > 7:
        pytest.skip("hardware: this machine has the device")  # the gpu-only exception
    path = tmp_path / "out.json"
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", bench_name, "--quick", "--device", device, "--json", str(path), "--no-progress"])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert message in captured.err and len(captured.err.strip().splitlines()) == 1 and captured.out == ""
    assert not path.exists()


# ------------------------------------------------------------------------------------ NumPy peer


@pytest.mark.parametrize("capacity", [1, 5, 64, 1000])
def test_numpy_tree_matches_reference(capacity):
    """Integer masses make every sum exact, so the draws must equal the cumulative-sum search."""
    rng = np.random.default_rng(capacity)
    tree = NumpySumTree(capacity)
    leaves = np.zeros(capacity)
    for _ in range(5):
        idx = rng.integers(0, capacity, 2 * capacity)
        val = rng.integers(0, 5, 2 * capacity).astype(float)
        tree.update(idx, val)
        leaves[idx] = val  # NumPy assignment: the last duplicate wins, as in the tree
        assert tree.total == leaves.sum()
        if tree.total == 0:
            continue
        for stratified in (True, False):
            draws = tree.sample(64, np.random.default_rng(1), stratified=stratified)
            u = np.random.default_rng(1).random(64)
            v = (np.arange(64) + u) * (tree.total / 64) if stratified else u * tree.total
            assert draws.tolist() == np.searchsorted(np.cumsum(leaves), v, side="right").tolist()
            assert np.all(leaves[draws] > 0)


def test_numpy_tree_never_draws_zero_mass_at_the_top():
    tree = NumpySumTree(8)
    tree.update(np.arange(8), np.array([0.0, 0.3, 0.0, 0.1, 0.0, 0.7, 0.0, 0.0]))
    draws = tree.sample(1000, np.random.default_rng(0))
    assert set(np.unique(draws).tolist()) <= {1, 3, 5}


# ------------------------------------------------------------------------------- kernel fast paths


def test_tree_alloc_aligns_child_groups():
    for size in (5, 21, 4097, 1 << 16):
        a = tree_alloc(size, np.inf)
        assert a.shape == (size,) and np.all(a == np.inf)
        assert (a.ctypes.data + 8) % 64 == 0  # node 1, the first child group, starts a cache line


@pytest.mark.parametrize("capacity", [1, 7, 64, 300, 4097])
@pytest.mark.parametrize("track", [False, True])
def test_level_by_level_update_equals_full_rebuild(capacity, track):
    """Batched updates (with duplicates, every batch size) leave exactly the tree a rebuild gives."""
    rng = np.random.default_rng(capacity)
    tree = SumTree(capacity, track_min=track, track_max=track)
    for k in (1, 2, 3, 17, 64, 255, 1024):
        idx = rng.integers(0, capacity, k)
        val = rng.lognormal(0.0, 4.0, k) * (rng.random(k) > 0.3)
        tree.update(idx, val)
        a = tree.arrays
        t, lo, hi = a.tree.copy(), a.tmin.copy(), a.tmax.copy()
        tree_rebuild(t, lo, hi, a.leaf0)
        assert t.tobytes() == a.tree.tobytes()
        assert lo.tobytes() == a.tmin.tobytes() and hi.tobytes() == a.tmax.tobytes()
        last = {int(i): float(v) for i, v in zip(idx, val, strict=True)}  # last value wins
        assert tree.priorities(list(last)).tolist() == list(last.values())


@pytest.mark.parametrize("capacity", [3, 64, 1000, 5000])
@pytest.mark.parametrize("k", [1, 4, 15, 16, 64, 256, 1000])
def test_stratified_merge_path_equals_plain_descent(capacity, k):
    """tree_sample's merged top levels pick the same leaves as a full descent (exact integer masses)."""
    rng = np.random.default_rng(capacity + k)
    tree = SumTree(capacity, track_min=False, track_max=False)
    leaves = rng.integers(0, 4, capacity).astype(float)
    leaves[-1] = 1.0
    tree.update(np.arange(capacity), leaves)
    a = tree.arrays
    for u in (rng.random(k), np.full(k, np.nextafter(1.0, 0.0)), np.zeros(k)):
        out, mass = np.empty(k, dtype=np.int64), np.empty(k)
        tree_sample(a.tree, a.leaf0, a.depth, u.copy(), True, out, mass)
        values = (np.arange(k) + u) * (a.tree[0] / k)
        ref, ref_mass = np.empty(k, dtype=np.int64), np.empty(k)
        tree_descend(a.tree, a.leaf0, a.depth, values, ref, ref_mass)
        assert out.tolist() == ref.tolist()
        assert np.all(leaves[out] > 0) and np.array_equal(mass, leaves[out])


def test_merge_path_rounding_edge_lands_on_last_positive_leaf():
    """Trailing zero-mass slots and queries at the very top never yield a zero-mass leaf."""
    cap = FANOUT**5
    tree = SumTree(cap, track_min=False, track_max=False)
    vals = np.zeros(cap)
    vals[[3, 100, 700]] = [0.1, 1e-300, 0.7]
    tree.update(np.arange(cap), vals)
    a = tree.arrays
    for k in (16, 256, 1024):
        out, mass = np.empty(k, dtype=np.int64), np.empty(k)
        tree_sample(a.tree, a.leaf0, a.depth, np.full(k, np.nextafter(1.0, 0.0)), True, out, mass)
        assert out[-1] == 700 and np.all(mass > 0)
        assert set(out.tolist()) <= {3, 100, 700}


@pytest.mark.parametrize("normalise", ["global", "batch"])
@pytest.mark.parametrize("stratified", [True, False])
def test_fused_is_weights_match_the_formula(normalise, stratified):
    rng = np.random.default_rng(5)
    cap, k, beta = 3000, 128, 0.4
    tree = SumTree(cap)
    tree.update(np.arange(cap), rng.random(cap) ** 0.6 + 1e-3)
    a = tree.arrays
    u = rng.random(k)
    out, probs, weights = np.empty(k, dtype=np.int64), np.empty(k), np.empty(k)
    norm = tree.min if normalise == "global" else 0.0
    tree_sample_is(a.tree, a.leaf0, a.depth, u.copy(), stratified, cap, beta, norm, out, probs, weights)
    ref_out, ref_mass = np.empty(k, dtype=np.int64), np.empty(k)
    tree_sample(a.tree, a.leaf0, a.depth, u.copy(), stratified, ref_out, ref_mass)
    ref_probs = ref_mass / tree.total
    ref_w = is_weights(ref_probs, cap, beta, tree.min / tree.total if normalise == "global" else None)
    assert np.array_equal(out, ref_out)
    np.testing.assert_allclose(probs, ref_probs, rtol=1e-15)
    np.testing.assert_allclose(weights, ref_w, rtol=1e-13)
    assert weights.max() <= 1.0 + 1e-15


# ----------------------------------------------------------------------------------------- drift


def test_drift_stays_at_rounding_level_quick():
    worst = bench.drift_check(10**6, capacity=2**14, batch=256, checks=5)
    assert worst <= 1e-12


@pytest.mark.slow
def test_drift_after_1e8_updates():
    """10^8 random updates at 2^20 slots keep |root - fsum(leaves)| / root <= 1e-12."""
    worst = bench.drift_check(10**8, capacity=2**20, batch=1024, checks=20)
    assert worst <= 1e-12
    assert math.isfinite(worst)


# ------------------------------------------------------------------------------------- agent bench


def test_agent_bench_quick_runs_our_side(tmp_path, capsys):
    """``prioritylab bench agent --quick`` with no peers: every agent x sampler row, the bare update, parts, and the
    rows with the replay diagnostics off, whose cost is reported on the rows with them on."""
    path = tmp_path / "agent.json"
    argv = ["bench", "agent", "--quick", "--peers", "--samplers", "uniform", "per", "lap", "--tries",
            "actor-full-critic", "diagnostics-off", "--no-progress", "--json", str(path)]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "bare update" in out and "torch threads 1" in out
    assert "skipping diagnostics-off td3 lap: measured for uniform and per only" in out  # named, not dropped
    doc = json.loads(path.read_text())
    rows = doc["results"]
    ours = [r for r in rows if r["kind"] == "ours"]
    assert {(r["agent"], r["sampler"]) for r in ours} == {(a, s) for a in ("td3", "sac") for s in ("uniform", "per",
                                                                                                   "lap")}  # fmt: skip
    assert {r["agent"] for r in rows if r["kind"] == "bare"} == {"td3", "sac"}
    assert not any(r["kind"] == "peer" for r in rows)
    for r in ours:
        assert len(r["rates"]) == 1 and r["steps_per_s"] > 0 and r["vs_bare"] > 0 and r["vs_peer"] is None
        assert set(r["parts_ms_median"]) == {"env", "act", "store", "sampler", "gather", "transfer", "update", "other"}
        assert r["parts_ms_median"]["transfer"] == 0.0  # on the CPU the tensors share the arrays
        assert r["parts_ms_median"]["update"] > 0
    assert next(r for r in ours if r["sampler"] == "uniform")["overhead"] == 0.0
    assert doc["config"]["hidden"] == 32 and doc["load"]["torch_threads"] == 1
    off = [r for r in rows if r["name"] == "prioritylab, diagnostics off"]
    assert {(r["agent"], r["sampler"]) for r in off} == {(a, s) for a in ("td3", "sac") for s in ("uniform", "per")}
    for r in ours:  # lap has no row with them off
        assert (r["diagnostics_cost"] is not None) == (r["sampler"] != "lap")
        assert r["sampler"] == "lap" or math.isfinite(r["diagnostics_cost"])


def test_agent_bench_quick_runs_the_dqn_family_on_atari(tmp_path, capsys):
    """``--agents ddqn``: a training step is 4 agent steps and one update on a real ALE game; each of our rows
    reports its replay memory (the frames stored once per slot)."""
    path = tmp_path / "agent.json"
    argv = ["bench", "agent", "--quick", "--agents", "ddqn", "--peers", "--samplers", "uniform", "per",
            "--no-progress", "--json", str(path)]  # fmt: skip
    assert main(argv) == 0
    rows = json.loads(path.read_text())["results"]
    ours = [r for r in rows if r["kind"] == "ours"]
    assert {(r["agent"], r["sampler"]) for r in ours} == {("ddqn", "uniform"), ("ddqn", "per")}
    for r in ours:
        assert r["steps_per_s"] > 0 and r["vs_bare"] > 0 and r["parts_ms_median"]["env"] > 0
        # 10^4 slots of one 84x84 frame each, plus small per-slot fields: between 1 and 2 frames per slot
        assert 84 * 84 * 10_000 < r["memory_mb"] * 2**20 < 2 * 84 * 84 * 10_000


def test_agent_bench_quick_puts_prioritylab_inside_sb3_beside_plain_sb3(tmp_path):
    """With the SB3 peer, ``SB3 + prioritylab`` rows (uniform and per) time the same SB3 model with our replay:
    their overhead is over plain SB3, and on Atari their replay (one frame per slot) is under a third of SB3's
    (stacks of four frames, stored once with ``optimize_memory_usage``)."""
    path = tmp_path / "agent.json"
    argv = ["bench", "agent", "--quick", "--agents", "td3", "dqn", "--peers", "sb3", "--samplers", "uniform",
            "--no-progress", "--json", str(path)]  # fmt: skip
    assert main(argv) == 0
    rows = json.loads(path.read_text())["results"]
    inside = [r for r in rows if r["kind"] == "sb3"]
    assert {(r["agent"], r["sampler"]) for r in inside} == {(a, s) for a in ("td3", "dqn") for s in ("uniform", "per")}
    for r in inside:
        assert r["steps_per_s"] > 0 and math.isfinite(r["overhead"]) and r["memory_mb"] > 0
        assert set(r["parts_ms_median"]) == {"store", "gather", "sampler"}  # add, sample, priority update
    assert all(set(r["parts_ms_median"]) == {"store", "gather"} for r in rows if r["kind"] == "peer")
    plain = next(r for r in rows if r["agent"] == "dqn" and r["name"] == "stable-baselines3 (DQN)")
    for r in inside:
        if r["agent"] == "dqn":
            assert r["memory_mb"] < plain["memory_mb"] / 3


def test_agent_bench_timers_synchronise_around_each_part():
    """With a device's ``sync``, a timed call is bracketed by two synchronisations and its time lands in its part."""
    from prioritylab.bench.agent import Timers

    calls = []
    timers = Timers(sync=lambda: calls.append("sync"))
    timed = timers.timed(lambda x: calls.append(x) or x + 1, "part")
    assert timed(1) == 2 and calls == ["sync", 1, "sync"] and timers.seconds["part"] > 0
    timers.reset()
    assert timers.seconds == {"part": 0.0}


def test_agent_bench_times_the_transfer_and_restores_the_copy_even_when_a_step_fails(monkeypatch):
    """Our loop's ``transfer`` part is the replay's copy to the device, timed only while the contender runs:
    the buffer's copy function is back as it was afterwards, also when a step raises."""
    import torch

    from prioritylab.bench import agent as bench_agent
    from prioritylab.bench.cli import AGENT_QUICK
    from prioritylab.deep import loop
    from prioritylab.replay import buffer as replay_buffer

    config = {"env": "Pendulum-v1", "seed": 0, "total_steps": 10**6, "threads": 1, **AGENT_QUICK, "prefill": 50}
    ours = bench_agent.Ours("td3", "uniform", config)
    original = replay_buffer._to_device

    def failing_learn(*args, **kwargs):
        assert replay_buffer._to_device is not original  # the timed copy, while the contender runs
        replay_buffer._to_device(np.zeros(3, np.float32), torch.device("cpu"))
        raise RuntimeError("a failing step")

    monkeypatch.setattr(loop, "learn", failing_learn)
    with pytest.raises(RuntimeError, match="a failing step"):
        ours.run(1)
    assert replay_buffer._to_device is original
    assert ours.timers.seconds["transfer"] > 0


@pytest.mark.parametrize(("argv", "quick", "kept"), [
    (["sumtree", "--quick", "--seconds", "0.3", "--capacities", "2^12"], "QUICK", {"seconds": 0.3}),
    (["replay", "--quick", "--repeats", "2"], "QUICK_REPLAY", {"repeats": 2}),
    (["agent", "--quick", "--steps", "100", "--hidden", "64"], "AGENT_QUICK", {"steps": 100, "hidden": 64}),
    (["agent", "--quick", "--batch", "256", "--hidden", "256"], "AGENT_QUICK", {"batch": 256, "hidden": 256}),
    (["sumtree", "--quick", "--repeats", "3", "--capacities", "2^20"], "QUICK", {"repeats": 3}),
    (["agent", "--hidden=256", "--quick"], "AGENT_QUICK", {"hidden": 256}),
])  # fmt: skip
def test_an_option_given_beside_quick_is_kept(argv, quick, kept):
    """``--quick`` sets what the command line leaves out, as in the theory scripts: an option typed at its default
    value is kept too (it was once taken for one not given)."""
    from prioritylab.bench import cli as bench_cli
    from prioritylab.cli import build_parser

    args = build_parser().parse_args(["bench", *argv])
    preset = getattr(bench_cli, quick)
    settings = bench_cli.quick_settings(preset, args)
    assert set(settings) == set(preset) - set(kept) - ({"capacities"} if argv[0] == "sumtree" else set())
    assert all(getattr(args, k) == v for k, v in kept.items())


@pytest.mark.parametrize(("argv", "message"), [
    (["sumtree", "--peers", "numpy", "numpy"], "--peers gives numpy twice"),
    (["sumtree", "--capacities", "2^16", "65536"], "--capacities gives 65,536 twice"),
    (["agent", "--agents", "td3", "sac", "td3"], "--agents gives td3 twice"),
    (["agent", "--samplers", "per", "per"], "--samplers gives per twice"),
    (["replay", "--envs", "8", "8"], "--envs gives 8 twice"),
])  # fmt: skip
def test_a_list_option_that_repeats_a_value_is_refused(argv, message, capsys, tmp_path):
    """A repeated value would be timed twice and pooled (two "numpy (best peer)" rows, each the median of both):
    refused in one line before any work."""
    path = tmp_path / "bench.json"
    with pytest.raises(SystemExit) as err:
        main(["bench", *argv, "--json", str(path)])
    lines = capsys.readouterr().err.strip().splitlines()
    assert err.value.code == 2 and lines == [f"prioritylab bench {argv[0]}: error: {message}"]
    assert not path.exists()


def test_a_peer_whose_rows_cannot_all_be_set_up_is_skipped_whole(monkeypatch):
    """SB3's plain row and its rows with our replay stand together: if one of them cannot be set up, none is timed
    and the peer is named skipped, rather than its plain row timed while the record says it was skipped."""
    from prioritylab.bench import agent as bench_agent

    class Plain:
        def __init__(self, agent, config):
            self.name = "stable-baselines3"

    def broken(agent, sampler, config):
        raise RuntimeError("no prioritylab buffer here")

    monkeypatch.setitem(bench_agent.PEER_CLASSES, "sb3", Plain)
    monkeypatch.setattr(bench_agent, "SB3Prioritylab", broken)
    monkeypatch.setattr(bench_agent, "Bare", lambda agent, config, variant=None: "bare")
    monkeypatch.setattr(bench_agent, "Ours", lambda agent, sampler, config, diagnostics=True: "ours")
    contenders, skipped = bench_agent.build(["td3"], ["uniform"], ["sb3"], {}, log=lambda line: None)
    assert contenders == ["bare", "ours"]
    assert skipped == {"sb3 td3": "RuntimeError: no prioritylab buffer here"}


def test_the_drift_check_refuses_the_timing_options_it_does_not_read(tmp_path, capsys):
    path = tmp_path / "drift.json"
    with pytest.raises(SystemExit) as err:
        main(["bench", "sumtree", "--drift", "1000", "--quick", "--capacities", "2^10", "--json", str(path)])
    lines = capsys.readouterr().err.strip().splitlines()
    assert err.value.code == 2 and lines == ["prioritylab bench sumtree: error: --drift takes only --seed and "
                                             "--no-progress, got --capacities --quick --json"]  # fmt: skip
    assert not path.exists()


def test_every_dqn_contender_acts_at_one_epsilon_while_timed():
    """Ours would still explore near eps_start after a short prefill and seldom run its Q-network to act, where
    SB3 sits at its final epsilon: every DQN contender is timed at TIMED_EPSILON instead."""
    from prioritylab.bench import agent as bench_agent
    from prioritylab.bench.cli import AGENT_QUICK

    config = {"env": "Pendulum-v1", "atari_env": "ALE/Pong-v5", "seed": 0, "total_steps": 10**6, "threads": 1,
              **AGENT_QUICK, "prefill": 50}  # fmt: skip
    ours = bench_agent.Ours("dqn", "uniform", config)
    assert ours.agent.epsilon() == bench_agent.TIMED_EPSILON == ours.cfg.eps_end
    sb3 = bench_agent.SB3("dqn", config)
    assert sb3.model.exploration_rate == bench_agent.TIMED_EPSILON


def test_every_dqn_contender_times_one_network_at_quicks_size_and_at_natures():
    """SB3's DQN kept its NatureCNN at ``--quick``'s tiny network, which ours and tianshou's take, and was timed on
    27 times the parameters: it now takes the same filters, so the layers and their shapes are ours; at the
    default filters it keeps its own NatureCNN, the same layout."""
    from prioritylab.bench import agent as bench_agent
    from prioritylab.bench.cli import AGENT_QUICK

    config = {"env": "Pendulum-v1", "atari_env": "ALE/Pong-v5", "seed": 0, "total_steps": 10**6, "threads": 1,
              **AGENT_QUICK, "prefill": 50}  # fmt: skip

    def shapes(module):
        return [tuple(p.shape) for p in module.parameters()]

    for net in (AGENT_QUICK["atari_net"], None):
        here = {**config, "atari_net": net, "atari_buffer_size": 1000}
        ours, sb3 = bench_agent.Ours("dqn", "uniform", here), bench_agent.SB3("dqn", here)
        assert shapes(sb3.model.policy.q_net) == shapes(ours.agent.q), net
    assert sum(p.numel() for p in ours.agent.q.parameters()) > 10**6  # the Nature network, 512 wide


def test_the_agent_table_says_what_vs_unif_is_measured_against():
    """The ``vs unif`` column is an overhead over uniform's time per step (so a faster sampler is negative), and
    over plain SB3's for the ``SB3 + prioritylab`` rows: the table's last line says so."""
    from prioritylab.bench import agent as bench_agent

    rows = [
        bench_agent.Result("ours", "td3", "ours", "uniform", [100.0], steps_per_s=100.0, overhead=0.0),
        bench_agent.Result("ours", "td3", "ours", "per", [104.0], steps_per_s=104.0, overhead=-0.04),
        bench_agent.Result("SB3 + prioritylab", "td3", "sb3", "per", [90.0], steps_per_s=90.0, overhead=0.08),
    ]
    lines = bench_agent.format_table(rows).splitlines()
    assert "vs unif" in lines[0] and "-4.0%" in lines[3]
    assert lines[-1] == ("vs unif: time per step over uniform's, minus 1 (negative: faster); SB3 + prioritylab rows: "
                         "over plain SB3's")  # fmt: skip
