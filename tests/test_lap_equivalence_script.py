"""theory/lap_equivalence.py: a --quick run writes every file and every verdict; its verdicts can fail."""

import csv
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from theory_scripts import load_theory_script

from prioritylab import equivalence as eq
from prioritylab.verdict import DEMO_NOTE

FILES = {"checks.csv", "monte_carlo.csv", "chain.csv", "chain_summary.json", "chain_bias.png", "variance.csv",
         "manifest.json"}  # fmt: skip
OTHER_CLAIMS = [
    "Monte Carlo: sample mean -> exact", "Monte Carlo: 1/sqrt(M) rate",
    "Cliffwalk (a): LAP+Huber = uniform PAL", "Cliffwalk (a): PER+MSE = uniform eq. 7",
    "Cliffwalk (b): uniform MSE -> mean", "Cliffwalk (b): uniform L1 -> median",
    "Cliffwalk (b): PER+MSE -> argmin eq. 7", "Cliffwalk (b): LAP, PAL -> argmin PAL",
    "Cliffwalk (b): LAP and PAL trajectories agree", "Cliffwalk (b): PER and eq. 7 trajectories agree",
]  # fmt: skip
TORCH_CLAIMS = ["torch: LAP+Huber = uniform PAL", "torch: PER = uniform eq. 7", "torch: PER+Huber = uniform eq. 8"]


def load():
    return load_theory_script("lap_equivalence")


def read_checks(path: Path) -> dict[str, dict]:
    with open(path) as fh:
        return {row["claim"]: row for row in csv.DictReader(fh)}


def test_quick_run_writes_files_and_every_verdict(quick_demo):
    mod = load()
    tmp_path = quick_demo.out / "lap_equivalence"  # the demo's --quick run of the script (tests/conftest.py)
    assert "lap_equivalence.py: exit 0" in quick_demo.text
    assert FILES <= {p.name for p in tmp_path.iterdir()}
    rows = read_checks(tmp_path / "checks.csv")
    expected = list(mod.EXACT_ORDER) + OTHER_CLAIMS
    if importlib.util.find_spec("torch") is not None:
        expected += TORCH_CLAIMS
    assert set(rows) == set(expected)
    assert {r["verdict"] for r in rows.values()} == {"reproduced"}  # seeded: every claim reproduces
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["claims"] == len(expected) and manifest["not_reproduced"] == 0
    assert manifest["caveat"] == DEMO_NOTE  # the line printed under the verdicts, kept beside them
    assert [v["claim"] for v in manifest["verdict"]] == list(rows)
    out = quick_demo.printed("lap_equivalence.py")
    assert f"{len(expected)}/{len(expected)} claims reproduced" in out and DEMO_NOTE in out  # make demo runs --quick
    for claim in expected:
        assert claim in out


def test_verdicts_report_failures_built_to_fail(tmp_path, capsys, monkeypatch):
    """A deviation above its tolerance and chain runs far too short to settle are reported as not reproduced."""
    mod = load()
    good = eq.Check("Theorem 1", "quantity", 1e-14, 1e-15, eq.EXACT_TOL)
    bad = eq.Check("Corollary 1", "quantity", 1e-6, 1e-7, eq.EXACT_TOL)
    assert good.row()["verdict"] == "reproduced" and bad.row()["verdict"] == "not reproduced"
    table = mod.verdict_table([good, bad])
    assert table.splitlines()[2].endswith(" reproduced") and table.splitlines()[3].endswith(" not reproduced")

    def short_chain(seed, quick):  # 3 expected updates from Q = 0: nowhere near the fixed points
        return eq.chain_experiment(seed=seed, betas=(0.0, 0.4, 1.0), steps=3, l1_steps=3)

    monkeypatch.setattr(mod, "exact_checks", lambda rng, n_cases: [good, bad])
    monkeypatch.setattr(mod, "monte_carlo_checks", lambda seed, quick: ([], []))
    monkeypatch.setattr(mod, "torch_checks", lambda seed, quick: [])
    monkeypatch.setattr(mod, "cliffwalk_stepwise_checks", lambda seed, quick: [])
    monkeypatch.setattr(mod, "chain_part", short_chain)
    monkeypatch.setattr(mod, "variance_summary", lambda seed, n_sets: [
        {"ratio_to_uniform": 0.5, "ratio_to_best_other": 0.9}])  # fmt: skip
    assert mod.main(["--quick", "--out", str(tmp_path)]) == 0  # a claim that fails is not an error
    rows = read_checks(tmp_path / "checks.csv")
    assert rows["Theorem 1"]["verdict"] == "reproduced" and rows["Corollary 1"]["verdict"] == "not reproduced"
    for claim in ("uniform MSE -> mean", "PER+MSE -> argmin eq. 7", "LAP, PAL -> argmin PAL"):
        assert rows[f"Cliffwalk (b): {claim}"]["verdict"] == "not reproduced"
    assert rows["Cliffwalk (b): LAP and PAL trajectories agree"]["verdict"] == "reproduced"  # equal, if unsettled
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    n_bad = sum(r["verdict"] == "not reproduced" for r in rows.values())
    assert manifest["not_reproduced"] == n_bad >= 2
    out = capsys.readouterr().out
    assert f"{len(rows) - n_bad}/{len(rows)} claims reproduced" in out
    assert out.count(" not reproduced\n") == n_bad


@pytest.mark.parametrize("passed", [True, False])
def test_check_verdict_follows_the_tolerance(passed):
    tol = 1e-12
    check = eq.Check("c", "q", 0.0, tol * (0.5 if passed else 2.0), tol)
    assert check.passed is passed
    row = check.row()
    assert row["reproduced"] is passed and row["verdict"] == ("reproduced" if passed else "not reproduced")
    assert np.isfinite(row["rel_dev"])


def test_data_sets_checked_with_eps_0_hold_no_zero(monkeypatch):
    """With eps = 0 one zero TD error sets PER's eta and every weight to 0: Theorem 3 and Corollary 3 would
    compare 0 with 0, so the script's eps = 0 data sets hold none (their zeros become kappa/4)."""
    mod = load()
    seen, real = [], eq.exact_case

    def recording(delta, rng, **kw):
        seen.append((delta.copy(), kw["eps"], kw["kappa"]))
        return real(delta, rng, **kw)

    monkeypatch.setattr(mod.eq, "exact_case", recording)
    mod.exact_checks(np.random.default_rng(0), 8)
    with_eps0 = [(d, k) for d, eps, k in seen if eps == 0.0]
    assert with_eps0 and all((d != 0).all() for d, _ in with_eps0)
    assert any((d == k * mod.NONZERO).any() for d, k in with_eps0)  # a zero was there, and replaced
    assert any((d == 0).any() for d, eps, _ in seen if eps > 0)  # zeros stay where PER adds eps
