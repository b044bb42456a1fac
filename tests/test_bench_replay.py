"""``prioritylab bench replay``: the smoke run, and the self-check of every contender.

Nothing is timed here: the timing loop is replaced by a stub that runs each
step a few times, so the tests check that every step runs and that the tables
and JSON come out, never how fast anything is.  The smoke runs use a short
self-check (``CHECK_DRAWS`` lowered); the tests of the check itself draw as
many rows as the benchmark does.  cpprb and tianshou are not installed by
``make test``; the check of each peer runs for the peers that import (the
``bench`` extra), as in tests/test_bench.py.
"""

import json
from dataclasses import replace

import numpy as np
import pytest

from prioritylab.bench import replay as bench
from prioritylab.bench import replay_check as check
from prioritylab.bench import replay_contenders as contenders
from prioritylab.cli import main

OURS = ("prioritylab per", "prioritylab uniform", "prioritylab per +diagnostics", "prioritylab per (batch IS)")


@pytest.fixture
def untimed(monkeypatch):
    calls = {}

    def fake_measure(step, seconds, warmup=3):
        for _ in range(3):
            step()
        calls[step] = calls.get(step, 0) + 3
        return 1.0

    monkeypatch.setattr(bench, "measure", fake_measure)
    monkeypatch.setattr(check, "CHECK_DRAWS", 20 * contenders.BATCH)  # a short self-check: these tests are of the run
    return calls


def test_quick_run_without_peers(untimed, tmp_path, capsys):
    """The quick run end to end, at the torch thread count asked for (one full run serves both: each builds and
    checks every contender); the default count is 1."""
    import torch

    from prioritylab.cli import build_parser

    assert build_parser().parse_args(["bench", "replay"]).threads == 1
    path = tmp_path / "replay.json"
    before = torch.get_num_threads()
    try:
        assert main(["bench", "replay", "--quick", "--peers", "--no-progress", "--threads", "2", "--json",
                     str(path)]) == 0  # fmt: skip
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    out = capsys.readouterr().out
    assert "prioritylab per" in out and "prioritylab uniform" in out and "memory per 100,000" in out
    doc = json.loads(path.read_text())
    cells = {(r["layout"], r["num_envs"], r["contender"]) for r in doc["results"]}
    kinds = ("per", "uniform", "per +diagnostics", "per (batch IS)")
    assert cells == {(layout, n, f"prioritylab {k}") for layout in ("mujoco", "atari") for n in (1, 8) for k in kinds}
    assert all(r["ratio"] is None for r in doc["results"])  # no peer, no ratio
    assert doc["config"]["peers"] == []
    assert len(untimed) == 16  # every cell's steps ran
    assert all(r["check"] == "" for r in doc["results"])
    checked = {(c["layout"], c["num_envs"], c["contender"]) for c in doc["self_check"] if c["passed"]}
    assert checked == cells and "self-check:" in out  # every contender checked, before the timing
    assert out.index("self-check:") < out.index("steps/s")
    # the conditions of the figures: torch's threads (SB3's batch copy runs on them), the load and the code
    assert doc["config"]["threads"] == 2 and doc["load"]["torch_threads"] == 2
    assert len(doc["load"]["before"]["loadavg_1_5_15"]) == 3 and "git_dirty" in doc and "git_commit" in doc
    assert "torch threads 2; load average (1 min)" in out


def test_step_returns_torch_batches_and_memory_matches_formula(untimed):
    import numpy as np
    import torch

    layout = contenders.LAYOUTS["atari"]
    built = bench.build(layout, 2, 256, peers=[])
    per = next(c for c in built if c.name == "prioritylab per")
    with_diagnostics = next(c for c in built if c.name == "prioritylab per +diagnostics")
    assert with_diagnostics.step().obs.shape == (contenders.BATCH, 4, 84, 84)
    batch = per.step()
    assert isinstance(batch.obs, torch.Tensor) and batch.obs.shape == (contenders.BATCH, 4, 84, 84)
    assert batch.obs.dtype == torch.uint8 and batch.weights.dtype == torch.float32
    assert np.all(batch.weights.numpy() <= 1.0)
    formula = bench.estimate_bytes(256, layout.obs_shape, layout.obs_dtype, layout.action_shape, layout.action_dtype, 4)
    assert abs(per.memory_bytes - formula) / formula < 0.05
    rows = bench.memory_rows(bench._cell_results(layout, 2, 256, built, {c.name: [1.0] for c in built}))
    assert [r["contender"] for r in rows] == [c.name for c in built]  # one row per contender, peers none
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


@pytest.mark.parametrize(("args", "message"), [
    (["--calls", "0"], "--calls must be at least 1, got 0"),
    (["--batches", "0"], "--batches must each be in [1, 2^62], got 0"),
    (["--batches", "8", str(2**62 + 1)], f"--batches must each be in [1, 2^62], got {2**62 + 1}"),
    (["--capacity", "3"], "--capacity must be in [4, 2^62] (a replay needs n_step + frame_stack + 2 slots), got 3"),
    (["--threads", "4097"], "--threads must be in [1, 4096], got 4097"),
    (["--capacity", "1000000"], "--capacity 1,000,000: the buffer's storage and the arrays it is filled from need "
                                "at least 223.0 MB but only 100.0 MB of memory is available"),
    (["--capacity", "1000", "--batches", str(10**6)], "--batches 1,000,000: a batch needs at least 360.0 MB beside "
                                                      "the buffer's 223.1 kB but only 100.0 MB of memory is available"),
    (["--copies", "--threads", "0"], "--threads must be in [1, 4096], got 0"),
])  # fmt: skip
def test_transfer_ab_refuses_a_size_it_cannot_run_in_one_line_before_any_buffer(capsys, monkeypatch, args, message):
    """A count below 1, a size past 2^62 or past the memory available (at least: the buffer's storage, 123 bytes a
    slot, and the arrays it is filled from, 100; a batch's rows), or a thread count past train's bound: one line
    before any buffer is filled (a large --capacity or --batches ran out of memory with a traceback, a large
    --threads hung).  At 10^6 slots the run's resident set grew by about 295 MB, above the 223 MB counted."""
    from theory_scripts import load_script

    from prioritylab import _checks

    script = load_script("transfer_ab")
    monkeypatch.setattr(_checks, "available_bytes", lambda: 100_000_000)
    monkeypatch.setattr(script, "filled_buffer", lambda *a, **k: pytest.fail("a buffer was filled"))
    with pytest.raises(SystemExit) as stop:
        script.main(["--device", "cpu", *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1 and err[0].endswith(message), err


def test_transfer_ab_copies_checks_no_buffer_it_does_not_fill(monkeypatch):
    """``--copies`` times two fixed batches and fills no buffer, so its unused --capacity is not checked."""
    from theory_scripts import load_script

    from prioritylab import _checks

    script = load_script("transfer_ab")
    monkeypatch.setattr(_checks, "available_bytes", lambda: 100_000_000)  # below the default --capacity's need
    monkeypatch.setattr(script, "_run", lambda args: [])
    assert script.main(["--device", "cpu", "--copies"]) == 0


def test_transfer_ab_checks_its_json_path_before_any_timing_and_leaves_no_folder_behind(tmp_path, capsys,
                                                                                        monkeypatch):  # fmt: skip
    """An existing folder as ``--json`` is one line before any buffer is filled (it failed after the timings); a
    folder the check made is taken back when the timings then fail; every option has its help."""
    from theory_scripts import load_script

    script = load_script("transfer_ab")
    monkeypatch.setattr(script, "measure", lambda *a, **k: pytest.fail("timed before the checks"))
    with pytest.raises(SystemExit) as stop:
        script.main(["--device", "cpu", "--json", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1 and err[0].endswith(f"--json {tmp_path} is a folder, not a file")

    def failing(*args, **kwargs):
        assert (tmp_path / "new").is_dir()
        raise RuntimeError("a failing timing")

    monkeypatch.setattr(script, "measure", failing)
    with pytest.raises(RuntimeError, match="a failing timing"):
        script.main(["--device", "cpu", "--json", str(tmp_path / "new" / "ab.json")])
    assert not (tmp_path / "new").exists()
    with pytest.raises(SystemExit):
        script.main(["--help"])
    assert "--device DEVICE torch device: cpu, cuda" in " ".join(capsys.readouterr().out.split())


def test_a_resident_set_that_did_not_grow_is_not_printed_as_a_size():
    """The RSS column is the growth of the process's resident set while a buffer was built: a build that reused
    memory freed before it shows no growth, which is not a size of 0 MB."""
    def result(rss):
        return bench.Result("atari", 8, 2**10, "prioritylab per", True, 1.0, [1.0], rss_bytes=rss,
                            memory_bytes=7_185 * 2**10)  # fmt: skip

    rows = bench.format_memory([result(0), result(-4096), result(4096), result(7_200 * 2**10)]).splitlines()[3:]
    assert [row.split()[4] for row in rows] == ["—", "—", "<1", "720"]


# ------------------------------------------------------------------------------------------ self-check


def _check(make_contender, layout="mujoco", n=1, **kw):
    """check_contender of ``make_contender(layout, n, capacity, steps)``, built on the checked layout."""
    small = check.check_layout(contenders.LAYOUTS[layout])
    return check.check_contender(lambda cap, s: make_contender(small, n, cap, s), contenders.LAYOUTS[layout], n, **kw)


def _ours(kind="per", **kw):
    return lambda layout, n, cap, s: contenders._prioritylab(kind, layout, n, cap, s, **kw)


def _with_view(make_contender, change):
    """The contender, its hand-over changed by ``change(view) -> view`` (indices and the buffer untouched)."""

    def make(layout, n, cap, s):
        c = make_contender(layout, n, cap, s)
        view = c.probe.view
        return replace(c, probe=replace(c.probe, view=lambda batch: change(view(batch))))

    return make


def test_the_self_check_passes_every_prioritylab_contender_on_both_layouts():
    checks = check.self_check(["mujoco", "atari"], [1, 8], peers=[])
    assert [(c.layout, c.num_envs, c.contender) for c in checks] == [
        (layout, n, name) for layout in ("mujoco", "atari") for n in (1, 8) for name in OURS]
    for c in checks:
        assert c.passed, f"{c.contender} ({c.layout}, N={c.num_envs}): {c.reason}"
        assert c.draws >= check.CHECK_DRAWS and c.p_value > check.CHECK_LEVEL and not c.differences
        assert c.rows == (255 if (c.layout, c.num_envs) == ("mujoco", 1) else 248 if c.layout == "mujoco"
                          else 252 if c.num_envs == 1 else 224)  # each environment's newest step waits; stacks
        if c.kind == "per":  # read an overwritten frame once the ring has wrapped
            assert c.weight_error < 1e-6 and c.batches == "stratified" and c.eps == 1e-6
            assert c.normalise == ("batch" if c.contender.endswith("(batch IS)") else "buffer")
        else:
            assert c.weight_error == 0.0 and c.batches == "independent"


def test_the_self_check_fails_a_contender_that_samples_uniformly_while_claiming_priorities():
    def make(layout, n, cap, s):
        c = contenders._prioritylab("uniform", layout, n, cap, s)
        probe = replace(c.probe, update=lambda batch, td: None, eps=1e-6, normalise="buffer")
        return replace(c, kind="per", probe=probe)

    res = _check(make, "atari", 8)
    assert not res.passed and res.p_value < 1e-100
    assert "frequencies do not follow priority^0.6 / sum" in res.reason and "IS weights differ" in res.reason
    assert "\n" not in res.reason


def test_the_self_check_fails_a_sampler_whose_alpha_is_not_the_benchmarks(monkeypatch):
    make_sampler = contenders.make_sampler
    monkeypatch.setattr(contenders, "make_sampler", lambda kind, cap, **kw: make_sampler(kind, cap, alpha=1.0, **kw))
    res = _check(_ours("per"))
    assert not res.passed and "frequencies do not follow" in res.reason and "IS weights differ" in res.reason


def test_the_self_check_fails_weights_normalised_otherwise_than_claimed():
    def make(layout, n, cap, s):
        c = contenders._prioritylab("per", layout, n, cap, s)  # global normaliser, claimed to be the batch's
        return replace(c, probe=replace(c.probe, normalise="batch"))

    res = _check(make, "mujoco", 8)
    assert not res.passed and res.p_value > check.CHECK_LEVEL  # it draws right; its weights are another rule's
    assert res.reason.startswith("IS weights differ from (N P(i))^-0.4 over the batch's largest")


def _roll(fields):
    return lambda v: {**v, **{f: np.roll(v[f], 1, axis=0) for f in fields}}


@pytest.mark.parametrize(("fields", "layout", "message"), [
    (("obs", "next_obs", "action", "reward"), "atari", "drawn rows whose fields are another row's than the index "
                                                        "reported holds"),
    (("next_obs",), "atari", "drawn next_obs other than the one written with the row's obs"),
    (("action",), "mujoco", "drawn actions other than the one written with the row's obs"),
    (("reward",), "mujoco", "drawn rewards other than the one written with the row's obs"),
])  # fmt: skip
def test_the_self_check_fails_a_contender_that_hands_back_another_rows_fields(fields, layout, message):
    """Every field of a drawn row shifted to the next drawn row: another row than the index reported; one field
    shifted: the fields of two rows at once."""
    res = _check(_with_view(_ours("per"), _roll(fields)), layout, 8, draws=10 * contenders.BATCH)
    assert not res.passed and message in res.reason


def test_a_difference_the_contender_declares_is_named_and_no_other_passes():
    """next_obs replaced by obs on one row: passes as a named difference where the contender declares it for that
    row, fails where it does not."""

    def corrupt(v):  # row 200 (step 200 of the one environment): its newest frame's first two pixels
        newest = v["obs"][:, -1].reshape(len(v["obs"]), -1).astype(np.int64)
        hit = newest[:, 0] + 256 * newest[:, 1] == 200
        return {**v, "next_obs": np.where(hit[:, None, None, None], v["obs"], v["next_obs"])}

    def declared(layout, n, cap, s):
        c = _with_view(_ours("per"), corrupt)(layout, n, cap, s)
        edge = contenders.Edge(np.array([200]), frozenset({"next_obs"}), "hands back obs as next_obs on row 200")
        return replace(c, probe=replace(c.probe, edges=lambda written: {"row 200": edge}))

    ok = _check(declared, "atari", 1, draws=20 * contenders.BATCH)
    assert ok.passed, ok.reason
    assert ok.differences == {"row 200": "hands back obs as next_obs on row 200"}
    assert 0 < ok.seen["row 200"] < ok.checked and ok.checked >= 20 * contenders.BATCH
    bad = _check(_with_view(_ours("per"), corrupt), "atari", 1, draws=20 * contenders.BATCH)
    assert not bad.passed and "next_obs other than the one written" in bad.reason and "step 200 of env 0" in bad.reason


def test_every_installed_peer_passes_its_self_check_and_its_differences_are_named():
    """The peers that import (all three with the ``bench`` extra; SB3 alone with ``make test``'s install)."""
    import torch

    peers, _ = contenders.available_peers()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the benchmark runs them (SB3's copy of a batch runs on torch's threads)
    try:
        _check_peers(peers)
    finally:
        torch.set_num_threads(threads)


def _check_peers(peers):
    for layout in ("mujoco", "atari"):
        for n in (1, 8):
            for name, make in contenders.makers(check.check_layout(contenders.LAYOUTS[layout]), n, peers)[len(OURS):]:
                res = check.check_contender(make, contenders.LAYOUTS[layout], n)
                assert res.passed, f"{name} ({layout}, N={n}): {res.reason}"
                assert res.contender == name and res.p_value > check.CHECK_LEVEL
                if name == "tianshou" and layout == "atari":  # its documented edge rows with frame stacks
                    assert set(res.differences) == {"newest row's obs_next", "oldest rows' stacks"}
                else:
                    assert not res.differences
                if name == "sb3":
                    assert res.kind == "uniform" and res.weight_error is None and res.batches == "independent"
                else:
                    assert res.kind == "per" and res.weight_error < 1e-5
                    assert res.batches == ("independent" if name == "tianshou" else "stratified")


def test_check_only_prints_the_check_and_exits_by_its_verdict(untimed, tmp_path, capsys, monkeypatch):
    path = tmp_path / "check.json"
    argv = ["bench", "replay", "--check-only", "--peers", "--layouts", "mujoco", "--envs", "2", "--no-progress",
            "--json", str(path)]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "self-check:" in out and "steps/s" not in out and not untimed  # nothing timed
    doc = json.loads(path.read_text())
    assert [c["contender"] for c in doc["self_check"]] == list(OURS) and all(c["passed"] for c in doc["self_check"])
    _claims_priorities(monkeypatch, "uniform")
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "prioritylab uniform (mujoco, N=2) FAILED its self-check, no ratio: frequencies do not follow" in out


def test_check_only_refuses_the_timing_options_in_one_line(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["bench", "replay", "--check-only", "--seconds", "2", "--quick"])
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and err.endswith("--check-only times nothing, got --seconds --quick")


def _claims_priorities(monkeypatch, kind):
    """Make ``prioritylab <kind>`` a uniform sampler that says it is prioritized."""
    build = contenders._prioritylab

    def fake(k, *args, **kw):
        c = build(k, *args, **kw)
        if k != kind:
            return c
        return replace(c, kind="per", probe=replace(c.probe, update=lambda b, td: None, normalise="buffer"))

    monkeypatch.setattr(contenders, "_prioritylab", fake)


def test_a_contender_failing_its_check_is_timed_but_gets_no_ratio_and_is_no_ones_peer(untimed, monkeypatch):
    def contender(name, ours, kind="per"):
        return contenders.Contender(name, ours, kind, lambda: None, "")

    layout = contenders.LAYOUTS["mujoco"]
    cell = [contender("prioritylab per", True), contender("cpprb", False), contender("tianshou", False)]
    rates = {"prioritylab per": [2.0], "cpprb": [4.0], "tianshou": [1.0]}
    trusted = bench._cell_results(layout, 1, 64, cell, rates)
    assert trusted[0].ratio == 0.5 and trusted[0].versus == "cpprb"
    refused = bench._cell_results(layout, 1, 64, cell, rates, {"cpprb": "failed its self-check: x"})
    assert refused[0].ratio == 2.0 and refused[0].versus == "tianshou"  # against the fastest peer that passed
    assert refused[1].check == "failed its self-check: x" and refused[1].steps_per_s == 4.0
    assert "no ratio: self-check" in bench.format_table(refused).splitlines()[3]
    ours_refused = bench._cell_results(layout, 1, 64, cell, rates, {"prioritylab per": "failed its self-check: y"})
    assert ours_refused[0].ratio is None and ours_refused[0].check
    # a run given no verdict for a contender gives it no ratio
    results = bench.run(["mujoco"], [2], peers=[], capacities={"mujoco": 64}, progress=False, checks=[])
    assert {r.check for r in results} == {"not self-checked"}


def test_the_benchmark_marks_the_row_of_a_contender_that_fails_its_check(untimed, tmp_path, capsys, monkeypatch):
    _claims_priorities(monkeypatch, "uniform")
    path = tmp_path / "replay.json"
    argv = ["bench", "replay", "--quick", "--peers", "--layouts", "mujoco", "--envs", "2", "--no-progress", "--json",
            str(path)]  # fmt: skip
    assert main(argv) == 0  # the others' figures stand
    out = capsys.readouterr().out
    assert "prioritylab uniform (mujoco, N=2) FAILED its self-check, no ratio:" in out
    row = next(line for line in out.splitlines() if "prioritylab uniform" in line and "no ratio: self-check" in line)
    assert row.split()[:2] == ["mujoco", "2"]
    doc = json.loads(path.read_text())
    checks = {r["contender"]: r["check"] for r in doc["results"]}
    assert checks["prioritylab uniform"].startswith("failed its self-check: frequencies do not follow")
    assert all(v == "" for k, v in checks.items() if k != "prioritylab uniform")
