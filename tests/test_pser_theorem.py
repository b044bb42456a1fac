"""PSER Theorem 1 (docs/theory/pser-theorem.md): closed forms, exact chain, brute force, Monte Carlo, the script."""

from __future__ import annotations

import copy
import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from theory_scripts import load_theory_script

from prioritylab.cliffwalk.env import build_memory
from prioritylab.theory import pser_model as pm
from prioritylab.theory import pser_theorem as claims
from prioritylab.theory import pser_theorem_tables as points

Z_TEST = 4.0  # |MC - exact| / standard error; P(|z| > 4) = 6e-5 per fixed-seed comparison


def load_script():
    return load_theory_script("pser_theorem1")


def within(mc: pm.MCResult, exact: float) -> bool:
    return abs(mc.mean - exact) <= Z_TEST * mc.ci / 1.96


# --------------------------------------------------------------------------- closed forms


def test_per_closed_form_values():
    # 1 + sum_(k=1)^(n-1) N / 2^k = 2^(n+1) - 5 + 2^(2-n)
    assert pm.e_per_closed(1) == 1.0
    assert pm.e_per_closed(2) == 4.0  # 1 + 6/2
    assert pm.e_per_closed(3) == 11.5  # 1 + 14/2 + 14/4
    for n in range(2, 25):
        assert pm.e_per_closed(n) == pytest.approx(2.0 ** (n + 1) - 5 + 2.0 ** (2 - n), rel=1e-14, abs=0)


def test_pser_closed_form_special_cases():
    for n in range(2, 12):
        # no decay (window 0) is PER; the bound then is PER as well
        assert pm.e_pser_closed(n, 0.4, window=0) == pytest.approx(pm.e_per_closed(n), rel=1e-14, abs=0)
        assert pm.e_pser_bound(n, 0.4, window=0) == pytest.approx(pm.e_per_closed(n), rel=1e-14, abs=0)
        # rho -> 0: the chain is replayed in order, n steps
        assert pm.e_pser_closed(n, 1e-12) == pytest.approx(n, rel=1e-9, abs=0)
        # alpha enters only through r = rho^alpha
        assert pm.e_pser_closed(n, 0.64, alpha=0.5) == pytest.approx(pm.e_pser_closed(n, 0.8), rel=1e-14, abs=0)
    # n = 2 by hand: 2 + 3 r / (1 + r)
    for r in (0.1, 0.4, 0.9):
        assert pm.e_pser_closed(2, r) == pytest.approx(2 + 3 * r / (1 + r), rel=1e-14, abs=0)
    # rho -> 1: uniform random order, q_k -> 1/k!
    assert pm.in_order_probability(4, 1 - 1e-9) == pytest.approx(1 / 24, rel=1e-6, abs=0)


def test_interval_copies_count_the_memory():
    n = 6
    mem = build_memory(n, np.random.default_rng(0))
    right = mem.a_tm1 == mem.s_tm1 % 2  # right_action(n)[s] = s % 2
    for k in range(1, n + 1):
        assert pm.interval_copies(n, k) == int(np.sum((mem.s_tm1 == n - k) & right)) == 2 ** (k - 1)


def test_window_reaches_only_the_episode():
    assert pm.chain_length(8, None) == 7
    assert pm.chain_length(8, 20) == 7
    assert pm.chain_length(8, 5) == 5
    assert pm.e_pser_closed(8, 0.8, window=20) == pm.e_pser_closed(8, 0.8, window=None)


@pytest.mark.parametrize("n", range(2, 9))
def test_closed_forms_equal_exact_chain(n):
    assert pm.e_per_exact(n) == pytest.approx(pm.e_per_closed(n), rel=1e-12, abs=0)
    for rho in (0.4, 0.65, 0.8):
        for window in (None, 1, 3, 5):
            exact = pm.e_pser_exact(n, rho, window)
            assert exact == pytest.approx(pm.e_pser_closed(n, rho, window), rel=1e-12, abs=0)
    assert pm.e_pser_exact(n, 0.5, 3, mode="add") == pytest.approx(pm.e_pser_closed(n, 0.5, 3), rel=1e-12, abs=0)
    assert pm.e_pser_exact(n, 0.5, alpha=0.6) == pytest.approx(pm.e_pser_closed(n, 0.5, alpha=0.6), rel=1e-12, abs=0)


def test_exact_does_not_depend_on_storage_order():
    values = [pm.e_pser_exact(6, 0.65, 3, seed=s) for s in range(4)]
    assert max(values) - min(values) <= 1e-12 * values[0]


@pytest.mark.parametrize(
    "n, kwargs",
    [
        (2, dict(decay=False)),
        (3, dict(decay=False)),
        (2, dict(rho=0.4)),
        (3, dict(rho=0.4)),
        (3, dict(rho=0.8, mode="add")),
        (3, dict(rho=0.65, window=1)),
        (3, dict(rho=0.5, alpha=0.5)),
        (4, dict(rho=0.4, window=2)),
    ],
)
def test_exact_chain_equals_bruteforce(n, kwargs):
    brute = pm.e_bruteforce(n, **kwargs)
    if kwargs.get("decay", True):
        args = {k: v for k, v in kwargs.items() if k != "decay"}
        rho = args.pop("rho")
        exact = pm.e_pser_exact(n, rho, **args)
    else:
        exact = pm.e_per_exact(n)
    assert brute == pytest.approx(exact, rel=1e-10, abs=0)


def test_max_and_add_agree_in_the_model():
    assert pm.e_bruteforce(3, 0.6, mode="add") == pytest.approx(pm.e_bruteforce(3, 0.6, mode="max"), rel=1e-12, abs=0)


# --------------------------------------------------------------------------- the three readings


@pytest.mark.parametrize("reading", pm.READINGS)
@pytest.mark.parametrize(
    "n, kwargs",
    [
        (2, dict(rho=0.4)),
        (3, dict(rho=0.4)),
        (3, dict(rho=0.8)),  # gamma = 2/3 < rho: older decays survive MAX
        (3, dict(rho=0.65, window=1)),
        (3, dict(rho=0.6, mode="add")),
        (3, dict(rho=0.5, alpha=0.5)),
        (3, dict(rho=0.4, decay=False)),
        (4, dict(rho=0.4, window=2)),
        (4, dict(rho=0.65)),
    ],
)
def test_reading_exact_equals_bruteforce(n, kwargs, reading):
    # the unreduced chain (every slot, whole Q table, own replay code) against the reduced chain
    brute = pm.e_bruteforce(n, reading=reading, **kwargs)
    kwargs = dict(kwargs)
    rho = kwargs.pop("rho")
    assert pm.e_reading_exact(n, rho, reading=reading, method="chain", **kwargs) == pytest.approx(brute, rel=1e-10)
    assert pm.e_reading_exact(n, rho, reading=reading, **kwargs) == pytest.approx(brute, rel=1e-10)


def test_readings_differ_at_n2_by_hand():
    # n = 2, rho = r, alpha = 1: chain c_0 (mass 1), c_1 (mass r); N = 6, c_1's pair has 2 copies
    for r in (0.3, 0.45):
        assert pm.e_reading_exact(2, r, reading="post") == pytest.approx(2 + 3 * r / (1 + r), rel=1e-12)
        # re-decay: interval 1 costs 1 + r/(1+r); c_0's decay re-seeds c_1, then the only mass: 1 more
        assert pm.e_reading_exact(2, r, reading="redecay") == pytest.approx(2 + r / (1 + r), rel=1e-12)
        # real: as re-decay, plus c_0 keeping priority 1 against c_1's r: interval 2 costs 1 + 1/(1+r)
        assert pm.e_reading_exact(2, r, reading="real") == pytest.approx(3.0, rel=1e-12)


def test_post_reading_is_the_idealised_model():
    for n in (3, 6):
        for rho, window in ((0.4, None), (0.65, 2), (0.8, 5)):
            post = pm.e_reading_exact(n, rho, window, reading="post")
            assert post == pytest.approx(pm.e_pser_exact(n, rho, window), rel=1e-12)


@pytest.mark.parametrize("n", [3, 6, 10])
def test_redecay_closed_form_equals_chain(n):
    for rho in (0.4, 0.65):
        for window in (None, 1, 3, 5):
            for alpha in (1.0, 0.6):
                exact = pm.e_reading_exact(n, rho, window, alpha, reading="redecay", method="chain")
                assert pm.e_redecay_closed(n, rho, window, alpha) == pytest.approx(exact, rel=1e-12)


def test_redecay_closed_form_refuses_gamma_below_rho():
    with pytest.raises(ValueError, match="gamma"):
        pm.e_redecay_closed(3, 0.8)  # gamma = 2/3
    assert pm.e_redecay_closed(5, 0.8) == pytest.approx(pm.e_reading_exact(5, 0.8, reading="redecay"), rel=1e-12)


@pytest.mark.parametrize("reading", ["redecay", "real"])
def test_geometric_dp_equals_general_chain(reading):
    for n, rho, window in ((5, 0.4, None), (8, 0.4, 5), (8, 0.65, 3), (9, 0.8, None), (7, 0.5, 1)):
        fast = pm.e_reading_exact(n, rho, window, reading=reading, method="geometric")
        slow = pm.e_reading_exact(n, rho, window, reading=reading, method="chain")
        assert fast == pytest.approx(slow, rel=1e-12)
    with pytest.raises(ValueError, match="geometric"):
        pm.e_reading_exact(3, 0.8, reading=reading, method="geometric")


def test_real_reading_facts():
    for n in range(2, 9):
        # PER under the real reading: one wasted replay of each learned transition but the last
        assert pm.e_reading_exact(n, 0.4, reading="real", decay=False) == pytest.approx(
            pm.e_per_closed(n) + n - 1, rel=1e-12
        )
        for rho, window in ((0.4, 5), (0.8, None), (0.65, 2)):
            real = pm.e_reading_exact(n, rho, window, reading="real")
            redecay = pm.e_reading_exact(n, rho, window, reading="redecay")
            assert redecay < real <= redecay + n - 1  # the coupling of docs section 4
            assert redecay <= pm.e_pser_bound(n, rho, window)


@pytest.mark.parametrize("n", [3, 8])
def test_mc_within_ci_of_exact_per_reading(n):
    for reading in ("redecay", "real"):
        for rho, window in ((0.4, 5), (0.8, None), (0.65, 2)):
            mc = pm.e_pser_mc(n, rho, window, 20_000, np.random.default_rng(300 + n), reading=reading)
            assert within(mc, pm.e_reading_exact(n, rho, window, reading=reading))


def test_model_mc_real_reading_matches_testbed():
    # the model's kernel with Algorithm 1's rule and eps = 1e-6 against the cliffwalk learner
    from prioritylab.cliffwalk import run_lr1

    mc = pm.e_pser_mc(5, 0.4, 5, 4000, np.random.default_rng(7), reading="real", eps=1e-6)
    runs = np.array([run_lr1(5, "pser", rho=0.4, window=5, eps=1e-6, seed=s) for s in range(4000)], dtype=float)
    se = math.hypot(mc.ci / 1.96, runs.std(ddof=1) / math.sqrt(runs.size))
    assert abs(mc.mean - runs.mean()) <= Z_TEST * se


def test_doc_table_matches_code():
    # the generated n = 8 table of docs/theory/pser-theorem.md against the exact chains
    doc = (Path(__file__).resolve().parent.parent / "docs/theory/pser-theorem.md").read_text()
    script = load_script()
    block = doc.split(script.DOC_BEGIN)[1].split(script.DOC_END)[0]
    rows = [line for line in block.splitlines() if line.startswith("| W = eq. 8-9 |") or line.startswith("| unlimited")]
    rows = [r for r in rows if r.count("|") == 9]
    assert len(rows) == 6
    for line in rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rho = float(cells[1])
        window = None if cells[2] == "unlimited" else int(cells[2])
        assert float(cells[3]) == pytest.approx(pm.e_pser_bound(8, rho, window), abs=1e-4)
        for cell, reading in zip(cells[4:7], pm.READINGS, strict=True):
            value = pm.e_reading_exact(8, rho, window, reading=reading)
            assert float(cell.split()[0]) == pytest.approx(value, abs=1e-4)
            assert cell.endswith("✗") == (value > pm.e_pser_bound(8, rho, window))


# --------------------------------------------------------------------------- the bound


def test_proof_bound_fails_at_n2_by_hand():
    # exact 2 + 3r/(1+r) against the proof's 2 + r: the gap r(2 - r)/(1 + r) is positive for every r
    for r in (0.05, 0.4, 0.65, 0.8, 0.95):
        gap = pm.e_pser_exact(2, r) - pm.e_pser_bound(2, r)
        assert gap == pytest.approx(r * (2 - r) / (1 + r), rel=1e-10, abs=0)
        assert gap > 0


def test_bound_facts_that_do_hold():
    for n in range(2, 15):
        for rho in (0.4, 0.65, 0.8):
            for window in (None, 5):
                exact = pm.e_pser_closed(n, rho, window)
                assert n <= exact <= pm.e_per_closed(n)  # never slower than PER, never below n
                assert exact > pm.e_pser_bound(n, rho, window)  # the proof's bound is violated
    # the unlimited-window bound is linear and below n / (1 - rho)
    for rho in (0.4, 0.8):
        assert pm.e_pser_bound(16, rho) <= pm.e_pser_bound_loose(16, rho)
        assert pm.e_pser_bound(16, rho) - pm.e_pser_bound(15, rho) < 1 / (1 - rho) + 1e-12


def test_pser_is_still_exponential():
    for rho in (0.4, 0.8):
        ratio = [pm.e_pser_closed(n, rho) / pm.e_per_closed(n) for n in (14, 16, 18, 20)]
        limit = sum((1 - pm.in_order_probability(k, rho)) / 2 ** (k - 1) for k in range(2, 80))
        assert ratio[-1] == pytest.approx(limit, rel=1e-3, abs=0)
        assert 0.3 < limit < 1


# --------------------------------------------------------------------------- Monte Carlo


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_mc_within_ci_of_exact(n):
    per = pm.e_per_mc(n, 20_000, np.random.default_rng(100 + n))
    assert per.capped == 0 and per.runs == 20_000
    assert within(per, pm.e_per_exact(n))
    for rho, window in ((0.4, 5), (0.8, None), (0.65, 2)):
        mc = pm.e_pser_mc(n, rho, window, 20_000, np.random.default_rng(200 + n))
        assert within(mc, pm.e_pser_exact(n, rho, window))


def test_mc_step_by_step_equals_fast_forward():
    exact = pm.e_pser_exact(4, 0.4)
    slow = pm.e_pser_mc(4, 0.4, None, 20_000, np.random.default_rng(1), fast_forward=False)
    fast = pm.e_pser_mc(4, 0.4, None, 20_000, np.random.default_rng(2), fast_forward=True)
    assert within(slow, exact) and within(fast, exact)


def test_very_long_mc_n2_n3():
    for n in (2, 3):
        mc = pm.e_pser_mc(n, 0.4, None, 400_000, np.random.default_rng(n))
        assert within(mc, pm.e_bruteforce(n, 0.4))
        assert mc.ci < 0.01 * mc.mean


def test_mc_with_eps_matches_per_eps_closed_form():
    # PER's own |delta| + eps priorities, alpha = 0.5: the first interval is no longer one step
    closed = pm.e_per_closed(3, eps=0.05, alpha=0.5)
    assert closed > pm.e_per_closed(3) + 2
    mc = pm.e_per_mc(3, 40_000, np.random.default_rng(5), eps=0.05, alpha=0.5)
    assert within(mc, closed)


def test_mc_reproducible_and_restores_memory():
    a = pm.simulate(6, 300, np.random.default_rng(9), rho=0.4)
    b = pm.simulate(6, 300, np.random.default_rng(9), rho=0.4)
    np.testing.assert_array_equal(a, b)
    # runs on one memory are i.i.d.: the first 100 of 300 equal a fresh 100-run batch
    mem = build_memory(6, np.random.default_rng(3))
    long = pm.simulate(6, 300, np.random.default_rng(4), rho=0.4, memory=mem)
    short = pm.simulate(6, 100, np.random.default_rng(4), rho=0.4, memory=mem)
    np.testing.assert_array_equal(long[:100], short)


def test_cap_is_reported():
    steps = pm.simulate(6, 50, np.random.default_rng(0), decay=False, cap=5, fast_forward=False)
    assert (steps == -1).all()
    with pytest.raises(ValueError, match="converged"):
        pm.summarise(steps)


# --------------------------------------------------------------------------- input checks


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: pm.e_pser_closed(5, 1.0), "rho"),
        (lambda: pm.e_pser_closed(5, 0.0), "rho"),
        (lambda: pm.e_pser_bound(5, 0.4, window=-1), "window"),
        (lambda: pm.e_pser_closed(5, 0.4, window=2.5), "window"),
        (lambda: pm.e_per_closed(0), r"n must be a positive integer, got 0$"),
        (lambda: pm.e_per_closed(5, alpha=0.0), "alpha"),
        (lambda: pm.e_per_closed(5, eps=-1.0), "eps"),
        (lambda: pm.e_pser_exact(30, 0.4), "n must be at most"),
        (lambda: pm.e_pser_exact(4, 0.4, mode="mul"), "mode"),
        (lambda: pm.e_pser_mc(4, 0.4, runs=0), "runs"),
        (lambda: pm.interval_copies(4, 5), "interval"),
        (lambda: pm.e_reading_exact(4, 0.4, reading="pre"), "reading"),
        (lambda: pm.e_reading_exact(4, 0.4, method="fast"), "method"),
        (lambda: pm.e_pser_mc(4, 0.4, runs=10, reading="max"), "reading"),
    ],
)
def test_bad_input_raises(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --------------------------------------------------------------------------- the script


def test_growth_classifier():
    ns = np.arange(2, 17)
    assert claims.growth(ns, 2.0**ns)["kind"] == "exponential"
    assert claims.growth(ns, 3 * ns + 2)["kind"] == "linear"
    assert claims.growth(ns, 3 * ns - 4)["kind"] == "linear"
    assert claims.growth(ns, ns**2)["kind"] == "superlinear"
    assert claims.growth(ns, ns**2)["power"] == pytest.approx(2.0)
    assert claims.growth(ns, 7 * ns**1.5)["increment_power"] == pytest.approx(0.5, abs=0.01)


@pytest.mark.parametrize(
    ("series", "kind"),
    [
        (lambda n: 5 * n + n**2 / 4, "superlinear"),  # the local exponent of E at n = 16 is 1.44
        (lambda n: n**1.45, "superlinear"),
        (lambda n: n**1.3, "superlinear"),
        (lambda n: 3 * n - 20, "linear"),  # the local exponent of E is 3.3: an intercept is not curvature
        (lambda n: 4 * n - 3 * (1 - 0.8**n) / 0.2, "linear"),  # a bend that settles, like the re-decay series
        (lambda n: 100 - n, "not increasing"),
    ],
)
def test_growth_is_decided_by_the_increments_not_by_the_local_exponent(series, kind):
    ns = np.arange(2, 17).astype(float)
    assert claims.growth(ns, series(ns))["kind"] == kind


def test_growth_test_decides_and_keeps_its_error_rate():
    ns = np.arange(2, 17).astype(float)
    se = np.full(ns.shape, 0.5)
    rng = np.random.default_rng(0)
    linear = [claims.growth_test(ns, 3 * ns + 2 + rng.normal(0, 0.5, ns.size), se)["kind"] for _ in range(400)]
    # one-sided 1% tests: a linear series is called superlinear about 1% of the time
    assert linear.count("superlinear") <= 12
    assert linear.count("linear") >= 380
    quad = [claims.growth_test(ns, 0.2 * ns**2 + rng.normal(0, 0.5, ns.size), se)["kind"] for _ in range(100)]
    assert quad.count("superlinear") >= 95 and quad.count("linear") == 0
    # too noisy to tell: undecided, never "linear"
    wide = claims.growth_test(ns, 0.2 * ns**2, np.full(ns.shape, 30.0))
    assert wide["kind"] == "undecided"
    assert claims.growth_test(ns, 2.0**ns, 0.01 * 2.0**ns)["kind"] == "exponential"


@pytest.mark.parametrize(("argv", "message"), [
    (["--seed", "-1"], "argument --seed: must be a non-negative integer, got '-1'"),
    (["--write-doc", "DOC"], "has no generated block"),
    (["--write-doc", "MISSING"], "cannot be read: No such file or directory"),
    (["--mc-runs", "5"], "--mc-runs must be at least 100, got 5: the claims are z-tests"),
    (["--per-seeds", "2"], "--per-seeds must be at least 100, got 2"),
    (["--real-seeds", "2"], "--real-seeds must be at least 10, got 2"),
])  # fmt: skip
def test_the_script_refuses_a_bad_option_before_any_work(tmp_path, argv, message, capsys):
    script = load_script()
    (tmp_path / "DOC").write_text("a page without the generated block\n")
    argv = [str(tmp_path / a) if a in ("DOC", "MISSING") else a for a in argv]
    with pytest.raises(SystemExit) as err:
        script.main(["--quick", "--out", str(tmp_path / "out"), *argv])
    lines = capsys.readouterr().err.strip().splitlines()
    assert err.value.code == 2 and len(lines) == 1 and message in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_a_refused_write_doc_in_a_new_folder_leaves_no_folder_behind(tmp_path, capsys):
    """The check of ``--write-doc`` made its folder before it found no page there; the refusal took nothing back."""
    script = load_script()
    page = tmp_path / "new" / "deeper" / "page.md"
    with pytest.raises(SystemExit) as err:
        script.main(["--quick", "--out", str(tmp_path / "out"), "--write-doc", str(page)])
    lines = capsys.readouterr().err.strip().splitlines()
    assert err.value.code == 2 and len(lines) == 1 and f"--write-doc {page} cannot be read" in lines[0], lines
    assert list(tmp_path.iterdir()) == []


def test_a_run_smaller_than_the_defaults_says_its_verdicts_can_differ(tmp_path, capsys):
    """Settings below the defaults, without --quick, can flip a verdict (too few seeds for a z-test): the verdict
    table is followed by one line naming each option that shrank the run, and a default-sized option is not
    named."""
    script = load_script()
    argv = ["--n-max", "4", "--mc-runs", "100", "--real-seeds", "10", "--per-seeds", "3000", "--seed", "3"]
    assert script.main([*argv, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "fewer than the defaults" in x)
    assert line.startswith("--n-max 4, --mc-runs 100, --real-seeds 10: ")  # --per-seeds 3000 is the default
    assert out.index(line) > out.index("real PSER faster than real PER") and "--quick" not in out


def test_the_caveat_tells_make_demos_settings_from_other_smaller_runs():
    """make demo's settings were checked to keep every verdict: a run at exactly those (in any order) says so,
    and any other smaller run, --quick or not, gets the caveat."""
    from prioritylab.verdict import DEMO_NOTE, QUICK_CAVEAT, caveat

    assert caveat(False, []) is None and caveat(False, [], "per_fig1.py") is None
    assert caveat(True, []) == caveat(True, ["--seeds 3"], "per_fig2.py") == QUICK_CAVEAT
    assert caveat(False, ["--seeds 3"]).startswith("--seeds 3: fewer than the defaults")
    assert caveat(False, ["--seeds 2"], "per_fig2.py").startswith("--seeds 2: fewer than the defaults")
    assert caveat(False, ["--seeds 3"], "per_fig2.py") == DEMO_NOTE
    assert caveat(False, ["--real-seeds 20", "--mc-runs 2000"], "pser_theorem1.py") == DEMO_NOTE
    assert caveat(True, [], "lap_equivalence.py") == DEMO_NOTE
    assert caveat(False, ["--mc-runs 2000"], "pser_theorem1.py").startswith("--mc-runs 2000: fewer")


def test_script_quick_run(quick_demo):
    script = load_script()
    tmp_path = quick_demo.out / "pser_theorem1"  # the demo's --quick run of the script (tests/conftest.py)
    assert "pser_theorem1.py: exit 0" in quick_demo.text
    assert "--quick: smoke settings" in quick_demo.printed("pser_theorem1.py")
    with open(tmp_path / "expected_steps.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0].keys()) == script.COLUMNS
    assert len(rows) == 7 * 3  # n = 2..8, three rho
    for name in ("expected_steps_unlimited_window.csv", "real_runs.csv", "pser_theorem1.png", "manifest.json"):
        assert (tmp_path / name).stat().st_size > 0
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["caveat"].startswith("--quick: smoke settings")  # kept beside the verdicts it qualifies
    verdict = {v["claim"]: v["reproduced"] for v in manifest["verdict"]}
    words = {True: "reproduced", False: "not reproduced"}
    assert all(v["verdict"] == words[v["reproduced"]] for v in manifest["verdict"])
    assert verdict["E_PER closed form (eq. 28) = exact chain"]
    assert verdict["E_PSER derived closed form = exact chain, post-update"]
    assert verdict["E_PSER closed form = exact chain, re-decay (gamma >= rho)"]
    assert verdict["PER grows exponentially (2^n)"]
    assert not verdict["PSER bound (eq. 31) >= exact, post-update, unlimited W"]
    assert verdict["PSER bound (eq. 31) >= exact, re-decay, unlimited W"]
    assert not verdict["PSER bound (eq. 31) >= exact, real (Algorithm 1), unlimited W"]
    assert verdict["real PER follows E_PER + (n - 1)"]
    assert verdict["real PER data reject E_PER without the (n - 1) term"]
    for r in rows:
        assert math.isfinite(float(r["e_pser_real"])) and math.isfinite(float(r["e_per_real"]))
        for reading, key in claims.EXACT_KEY.items():
            n, rho = int(r["n"]), float(r["rho"])
            assert float(r[key]) == pytest.approx(
                pm.e_reading_exact(n, rho, 5 if rho == 0.4 else None, reading=reading)
            )
    assert {r["reading"] for r in manifest["readings"]} == set(claims.READING_NAMES.values())
    assert "re-decay" in manifest["readings_table"]
    # make demo prints the same table from the manifest
    from prioritylab.demo import readings_table

    assert readings_table(tmp_path) == manifest["readings_table"]
    assert readings_table(tmp_path / "missing") == ""
    summary = (tmp_path / "summary.md").read_text().splitlines()
    assert sum(line.startswith("| re-decay |") for line in summary) == 2


def test_verdict_flags_cases_built_to_fail():
    cfg = points.Config(n_max=5, mc_runs=2000, real_seeds=3, quick=True)
    tables, log, variants = points.compute(cfg)
    base = {v["claim"]: v["reproduced"] for v in claims.verdict(tables, variants, log)}
    assert base["E_PER closed form (eq. 28) = exact chain"]
    assert base["Monte Carlo within 95% CI of exact, post-update"]
    assert base["Monte Carlo within 95% CI of exact, re-decay"]
    assert not base["windowed bound (eq. 31 extended to W) >= exact, post-update, W = eq. 8-9"]
    assert base["windowed bound (eq. 31 extended to W) >= exact, re-decay, W = eq. 8-9"]
    assert base["0 <= E_real - E_redecay <= n - 1 (exact)"]
    # with W = eq. 8-9, Algorithm 1 is also checked against eq. 31 itself (no window), not only the windowed bound
    for r in tables["eq8-9"]:
        assert r["e_pser_bound_eq31"] == pm.e_pser_bound(r["n"], r["rho"], None, cfg.alpha)
        assert r["e_pser_bound_eq31"] <= r["e_pser_bound"]
    eq31 = "PSER bound (eq. 31) >= exact, real (Algorithm 1), W = eq. 8-9"
    assert eq31 in base
    lifted = copy.deepcopy(tables)
    for r in lifted["eq8-9"]:
        r["e_pser_bound_eq31"] = 2 * r["e_pser_real_exact"]
    assert {v["claim"]: v["reproduced"] for v in claims.verdict(lifted, variants, log)}[eq31]

    bad = copy.deepcopy(tables)
    bad["eq8-9"][3]["e_per_closed"] *= 1.001  # a perturbed closed form
    bad["unlimited"][5]["e_pser_closed"] *= 1 - 1e-6
    bad["unlimited"][6]["e_pser_redecay_closed"] *= 1 + 1e-6
    for r in bad["unlimited"]:  # Monte Carlo far from exact
        r["e_pser_mc"] = r["e_pser_exact"] + 10 * r["e_pser_mc_ci"]
        r["e_pser_real_mc"] = r["e_pser_real_exact"] - 10 * r["e_pser_real_mc_ci"]
    for kind in ("eq8-9", "unlimited"):  # a bound that would hold, one that would fail
        for r in bad[kind]:
            r["e_pser_bound"] = 2 * r["e_pser_exact"]
            r["e_pser_redecay_exact"] = r["e_pser_real_exact"] + r["n"]  # breaks the coupling gap too
    flagged = {v["claim"]: v["reproduced"] for v in claims.verdict(bad, variants, log)}
    assert not flagged["E_PER closed form (eq. 28) = exact chain"]
    assert not flagged["E_PSER derived closed form = exact chain, post-update"]
    assert not flagged["E_PSER closed form = exact chain, re-decay (gamma >= rho)"]
    assert not flagged["Monte Carlo within 95% CI of exact, post-update"]
    assert not flagged["Monte Carlo within 95% CI of exact, real (Algorithm 1)"]
    assert flagged["windowed bound (eq. 31 extended to W) >= exact, post-update, W = eq. 8-9"]
    assert flagged["PSER bound (eq. 31) >= exact, post-update, unlimited W"]
    assert not flagged["0 <= E_real - E_redecay <= n - 1 (exact)"]
    assert "not reproduced" in claims.format_verdict(claims.verdict(bad, variants, log))

    for claim in ("real PSER faster than real PER (n >= 3)", "no real run censored at the cap",
                  *(f"PSER never slower than PER (exact), {claims.READING_NAMES[r]}" for r in claims.READINGS)):
        assert base[claim], claim
    slow = copy.deepcopy(tables)
    for kind in ("eq8-9", "unlimited"):
        r = next(r for r in slow[kind] if r["n"] >= 3)
        r["e_pser_real"] = r["e_per_real"] + 1.0  # one point where real PSER is not faster
        for key in claims.EXACT_KEY.values():
            r[key] = r["e_per_exact"] * 1.01  # one point where PSER is slower than PER, every reading
    cut = copy.deepcopy(log)
    cut[-1]["steps"] = -1  # one real run censored at the cap
    found = claims.verdict(slow, variants, cut)
    flagged = {v["claim"]: v["reproduced"] for v in found}
    assert not flagged["real PSER faster than real PER (n >= 3)"]
    assert not flagged["no real run censored at the cap"]
    runs = len({tuple(r[k] for k in claims.RUN_KEYS) for r in log})  # each run once, however many rows read it
    assert next(v for v in found if v["claim"] == "no real run censored at the cap")["measured"] == \
        f"1 of {runs} censored"  # fmt: skip
    for reading in claims.READINGS:
        assert not flagged[f"PSER never slower than PER (exact), {claims.READING_NAMES[reading]}"]


def test_wrong_per_hypothesis_fails():
    # real PER at n = 2, 3, 4 with enough runs: E_PER + (n - 1) is accepted and E_PER alone is rejected
    cfg = points.Config(n_max=4, per_seeds=1500)
    check = points.per_hypotheses(cfg, points.PointCache(cfg))
    assert [r["n"] for r in check] == [2, 3, 4]
    for r in check:
        assert r["e_per_real_exact"] == pytest.approx(r["e_per_exact"] + r["n"] - 1, rel=1e-12)
    right = claims.per_hypothesis(check, lambda n: n - 1)
    wrong = claims.per_hypothesis(check, lambda n: 0)
    assert right["accepted"] and right["zmax"] <= claims.Z_MAX
    assert not wrong["accepted"] and wrong["zmax"] > 2 * claims.Z_MAX
    got = {v["claim"]: v["reproduced"] for v in claims.per_claims({"per_check": check, "eq8-9": []})}
    assert got == {
        "real PER follows E_PER + (n - 1)": True,
        "real PER data reject E_PER without the (n - 1) term": True,
    }
    # a sample too small to separate them: the rejection claim is not reproduced
    small = points.per_hypotheses(points.Config(n_max=4, per_seeds=5, seed=3), points.PointCache(points.Config(seed=3)))
    assert not claims.per_claims({"per_check": small, "eq8-9": []})[1]["reproduced"]


def test_run_means_against_the_bound_allow_for_their_standard_error():
    """The real runs' row compares noisy means: a mean above the bound by less than 2.33 standard errors holds,
    one above it by more fails, and the note names run means, not exact values."""
    from prioritylab.theory.pser_theorem import _mean_bound_claim

    def rows(over_in_se):
        return [{"n": 2, "rho": 0.4, "m": 10.0, "m_se": 0.1, "b": 10.0},
                {"n": 3, "rho": 0.4, "m": 10.0 + over_in_se * 0.1, "m_se": 0.1, "b": 10.0}]  # fmt: skip

    near = _mean_bound_claim("claim", rows(2.0), "m", "b")
    far = _mean_bound_claim("claim", rows(2.5), "m", "b")
    assert near["reproduced"] and "2/2" in near["measured"] and "run mean" in near["note"]
    assert not far["reproduced"] and "1/2" in far["measured"]


def test_each_rows_censored_counts_are_its_own_algorithms(monkeypatch):
    """A row reads real PER's runs and real PSER's: each count of censored runs is of one algorithm's (PER's were
    once added into PSER's one column, so a row could not say whose runs had hit the cap)."""
    def steps(n, scheme, *args):
        return np.array([5, -1, 7, -1]) if scheme == "pser" else np.array([5, 6, -1, 7])

    monkeypatch.setattr(points, "real_steps", steps)
    tables, _, _ = points.compute(points.Config(n_max=4, mc_runs=100, real_seeds=4, quick=True))
    for kind in ("eq8-9", "unlimited"):
        assert tables[kind] and all((r["per_censored"], r["pser_censored"]) == (1, 2) for r in tables[kind])
        assert all("censored" not in r for r in tables[kind])


def test_a_point_with_a_censored_run_has_no_mean():
    """A censored run's updates are unknown beyond the cap: its point's mean was once taken over the runs that
    converged, biased low, and read as a result; it is NaN now, which no claim reads as reproduced."""
    from prioritylab.theory.pser_theorem_tables import _mean_se

    mean, se = _mean_se(np.array([10, 12, 14]))
    assert mean == 12.0 and se == pytest.approx(2 / 3**0.5)
    assert all(np.isnan(v) for v in _mean_se(np.array([10, 12, -1])))
