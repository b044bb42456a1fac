"""Replay diagnostics of the Blind Cliffwalk testbed against a direct computation on the replays a reference
learner makes step for step, and on hand-made histograms with known answers."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from prioritylab.cli import main
from prioritylab.cliffwalk import learners as L
from prioritylab.cliffwalk.reference import Reference
from prioritylab.cliffwalk.runner import DIAGNOSTICS, RunConfig, age_quantile, run


def direct(cfg: RunConfig, seed: int, updates: int) -> dict:
    """The diagnostics computed from the (slot, weight) of every replay of the reference learner, which draws
    exactly as the jitted kernel (tests/test_cliffwalk_learners.py checks that step for step)."""
    ref = Reference(cfg, seed)
    draws = []
    draw = ref.draw

    def recording():
        i, w = draw()
        draws.append((i, w))
        return i, w

    ref.draw = recording
    for _ in range(updates):
        ref.step()
    slots = np.array([i for i, _ in draws])
    w = np.array([w for _, w in draws])
    last = np.zeros(ref.N, dtype=np.int64)
    ages = []
    for t, i in enumerate(slots, start=1):
        ages.append(t - last[i])
        last[i] = t
    counts = np.bincount(slots, minlength=ref.N)
    return {
        "ess_fraction": w.sum() ** 2 / (len(w) * (w**2).sum()),
        "weight_mean": w.mean(),
        "age_median": float(np.quantile(ages, 0.5, method="inverted_cdf")),
        "age_p90": float(np.quantile(ages, 0.9, method="inverted_cdf")),
        "coverage": np.count_nonzero(counts) / ref.N,
        "max_replays": int(counts.max()),
    }


@pytest.mark.parametrize(
    "scheme,beta",
    [("uniform", 0.0), ("per", 0.0), ("per", 0.5), ("per-rank", 1.0), ("pser", 0.4), ("greedy-td", 0.0)],
)
def test_diagnostics_equal_a_direct_computation_on_the_reference_replays(scheme, beta):
    # n = 5: 62 transitions, so every age of these 2,000 updates is below AGE_EXACT and the quantiles are exact
    cfg = RunConfig(n=5, scheme=scheme, beta=beta, cap=2000, stop_at_convergence=False, diagnostics=True)
    got = run(cfg, seed=3).diagnostics
    want = direct(cfg, 3, 2000)
    assert set(got) == set(DIAGNOSTICS)
    for key in ("age_median", "age_p90", "coverage", "max_replays"):
        assert got[key] == want[key], key
    for key in ("ess_fraction", "weight_mean"):  # sums of the same weights in the same order
        assert got[key] == pytest.approx(want[key], rel=1e-12, abs=0), key


def test_without_is_weights_the_ess_fraction_and_the_mean_weight_are_one():
    for scheme in ("uniform", "per", "lap", "oracle"):
        d = run(RunConfig(n=4, scheme=scheme, beta=0.0, diagnostics=True), seed=0).diagnostics
        assert d["ess_fraction"] == 1.0 and d["weight_mean"] == 1.0


def test_is_weights_of_proportional_per_shrink_the_steps():
    """PER with full IS correction (beta = 1) on n = 6: the weights (N P(i))^-1 / max_j (N P(j))^-1 are at most
    1 and mostly far below it, so the mean weight and the ESS fraction fall well below 1."""
    d = run(RunConfig(n=6, scheme="per", beta=1.0, diagnostics=True), seed=0).diagnostics
    assert 0 < d["weight_mean"] < 0.2 and 0 < d["ess_fraction"] < 0.5


def test_oracle_concentrates_on_few_transitions():
    d = run(RunConfig(n=6, scheme="oracle", diagnostics=True), seed=0).diagnostics
    assert d["coverage"] < 0.2  # it replays the transitions on the path back from the reward, first copies only


@pytest.mark.parametrize("scheme", ["uniform", "per", "pser", "per-rank"])
def test_turning_the_diagnostics_off_leaves_the_learning_unchanged(scheme):
    cfg = RunConfig(n=5, scheme=scheme, beta=0.5, record_every=100, diagnostics=True)
    on, off = run(cfg, seed=2), run(cfg.replace(diagnostics=False), seed=2)
    assert on.updates == off.updates and on.steps == off.steps
    assert np.array_equal(on.theta, off.theta) and np.array_equal(on.curve, off.curve, equal_nan=True)
    assert all(np.isnan(off.diagnostics[k]) for k in DIAGNOSTICS)
    assert on.diagnostics["coverage"] > 0


def test_64_bit_counters_for_caps_beyond_32_bits_give_the_same_diagnostics():
    from prioritylab.cliffwalk import runner

    cfg = RunConfig(n=5, scheme="per", beta=0.5, cap=20_000, stop_at_convergence=False, diagnostics=True)
    assert runner.slot_dtype(cfg.cap) == np.int32 and runner.slot_dtype(2**31) == np.int64
    want = run(cfg, seed=1).diagnostics
    rng = np.random.default_rng(1)  # run() by hand, with the replay arrays of a 2^31 cap
    memory = runner.build_memory(cfg.n, rng)
    theta = runner.initial_theta(cfg, rng)
    rep = runner.allocate(cfg.replace(cap=2**31), memory)
    assert rep.slot_stats.dtype == np.int64
    L.run_kernel(L.transition_table(memory, cfg.n), runner.q_star(cfg.n), theta, runner.settings(cfg), rep, rng,
                 np.empty(0))  # fmt: skip
    assert runner.replay_diagnostics(rep) == want


def test_the_diagnostics_are_off_unless_asked_and_on_in_the_theory_scripts(tmp_path, capsys):
    """They add about a tenth to an update (docs/benchmarks.md): a plain run skips them, while the theory
    scripts, which print and write them, still gather them."""
    assert RunConfig().diagnostics is False
    assert all(np.isnan(v) for v in run(RunConfig(n=4), seed=0).diagnostics.values())
    import importlib.util

    from prioritylab.cliffwalk.experiments import DIAGNOSTIC_COLUMNS
    from prioritylab.demo import THEORY_DIR

    spec = importlib.util.spec_from_file_location("per_fig1", THEORY_DIR / "per_fig1.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--out", str(tmp_path / "f1"), "--quick", "--seeds", "1", "--no-progress"]) == 0
    assert "replay diagnostics" in capsys.readouterr().out
    with open(tmp_path / "f1" / "per_fig1_summary.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert rows and all(0 < float(r["coverage"]) <= 1 for r in rows)
    assert set(DIAGNOSTIC_COLUMNS) <= set(rows[0])


def test_the_age_bin_is_the_octave_and_32nd_that_frexp_gives():
    """The bin read from the float's exponent and mantissa bits equals its definition through ``frexp``
    (age = m 2^e, 0.5 <= m < 1) at every octave edge and around it, up to 2^62."""
    import math

    def by_frexp(age):
        if age < L.AGE_EXACT:
            return age
        m, e = math.frexp(age)
        return min(L.AGE_EXACT + L.AGE_PER_OCTAVE * (e - 11) + int((m - 0.5) * 2 * L.AGE_PER_OCTAVE), L.AGE_BINS - 1)

    ages = [2**k + d for k in range(10, 63) for d in (-1, 0, 1, 2**k // 64, 2**k // 32 - 1)]
    ages += [int(a) for a in np.random.default_rng(0).integers(1, 2**62, 2000)] + list(range(1, 5000))
    assert [L.age_bin(a) for a in ages] == [by_frexp(a) for a in ages]


def test_age_quantiles_on_hand_made_histograms():
    h = np.zeros(L.AGE_BINS, dtype=np.int64)
    h[[1, 2, 3, 10]] = [5, 1, 1, 3]  # ages 1 x5, 2, 3, 10 x3
    assert age_quantile(h, 0.5) == 1.0 and age_quantile(h, 0.6) == 2.0 and age_quantile(h, 0.9) == 10.0
    assert np.isnan(age_quantile(np.zeros(L.AGE_BINS, dtype=np.int64), 0.5))
    big = 5000
    k = L.age_bin(big)
    h2 = np.zeros(L.AGE_BINS, dtype=np.int64)
    h2[k] = 1
    edge = age_quantile(h2, 0.5)
    assert edge <= big < edge * (1 + 1 / L.AGE_PER_OCTAVE)  # a bin's lower edge, within 3.1 %
    for age in (1024, 1055, 1056, 2047, 2048, 5000, 10**6, 3 * 2**30 + 7):  # every bin's edge is below its ages
        h3 = np.zeros(L.AGE_BINS, dtype=np.int64)
        h3[L.age_bin(age)] = 1
        assert age_quantile(h3, 0.5) <= age < age_quantile(h3, 0.5) * (1 + 1 / L.AGE_PER_OCTAVE)
    assert [L.age_bin(a) for a in (1, 1023)] == [1, 1023] and L.age_bin(1024) == L.AGE_EXACT


def test_the_cli_prints_and_writes_the_diagnostics(tmp_path, capsys):
    assert main(["cliffwalk", "--n", "4", "--sampler", "per", "--beta", "1", "--seeds", "2", "--no-progress",
                 "--out", str(tmp_path)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "replay diagnostics" in out and "ess_fraction" in out
    for name in ("runs.csv", "summary.csv"):
        with open(tmp_path / name, newline="") as fh:
            header = next(csv.reader(fh))
        assert set(DIAGNOSTICS) <= set(header), name
    assert main(["cliffwalk", "--n", "4", "--seeds", "1", "--no-progress", "--no-diagnostics"]) == 0
    assert "replay diagnostics" not in capsys.readouterr().out
