"""The PER / PSER Blind Cliffwalk reproduction scripts: --quick runs, and verdicts that can fail."""

import json

import pytest
from theory_scripts import load_theory_script

from prioritylab.cliffwalk.experiments import CAP_PER_TRANSITION, verdict_table
from prioritylab.verdict import QUICK_CAVEAT


def load(name):
    return load_theory_script(name)


def summary_rows(medians: dict, censored_at: dict | None = None) -> list[dict]:
    """A summary as :func:`summarise` makes it, from ``{(label, n): median}``.

    ``censored_at`` maps ``(label, n)`` to a cap: every run of that cell is censored there.
    """
    censored_at = censored_at or {}
    rows = []
    for (label, n), m in medians.items():
        cap = censored_at.get((label, n))
        m = float(m if cap is None else cap)
        rows.append({"label": label, "n": n, "memory_size": 2 ** (n + 1) - 2, "seeds": 3, "median": m, "min": m,
                     "max": m, "censored": 0 if cap is None else 3, "median_is_lower_bound": cap is not None})
    return rows


WORDS = {True: "reproduced", False: "not reproduced", None: "n/a"}


@pytest.mark.parametrize("name", ["per_fig1", "per_fig2", "pser_fig7"])
def test_quick_mode_writes_files_and_a_verdict(name, quick_demo):
    mod = load(name)
    tmp_path = quick_demo.out / name  # the demo's --quick run of the script (tests/conftest.py)
    assert f"{name}.py: exit 0" in quick_demo.text
    files = {p.name for p in tmp_path.iterdir()}
    assert "manifest.json" in files
    assert any(f.endswith(".csv") for f in files) and any(f.endswith(".png") for f in files)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["verdict"] and all(c["verdict"] == WORDS[c["reproduced"]] for c in manifest["verdict"])
    ns = manifest["config"]["ns"]  # each template records the cap each size ran with, not the template's n and cap
    for template in manifest["config"]["templates"].values():
        assert "n" not in template and "cap" not in template
        assert template["caps"] == {str(n): CAP_PER_TRANSITION * (2 ** (n + 1) - 2) for n in ns}
    out = quick_demo.printed(f"{name}.py")
    assert mod.CLAIM in out and QUICK_CAVEAT in out  # its verdicts are the smoke settings'
    assert manifest["caveat"] == QUICK_CAVEAT  # kept beside the verdicts it qualifies
    table = out[out.index(" verdict") :]
    for c in manifest["verdict"]:
        assert c["claim"] in table
    if name != "pser_fig7":  # its rows are all claims; the PER scripts have context rows
        assert any(c["reproduced"] is None for c in manifest["verdict"]) and "n/a" in table


def test_fig1_verdict_fails_without_exponential_advantage():
    mod = load("per_fig1")
    ns = list(range(2, 9))
    flat = summary_rows({**{("uniform", n): 100.0 * n for n in ns}, **{("oracle", n): 50.0 * n for n in ns}})
    checks = mod.verdict(flat, ns)
    assert not checks[0]["reproduced"] and checks[1]["reproduced"]
    worse = summary_rows({**{("uniform", n): 10.0 * n for n in ns}, **{("oracle", n): 2.0**n for n in ns}})
    assert not mod.verdict(worse, ns)[1]["reproduced"]
    good = summary_rows({**{("uniform", n): 10 * 4.0**n for n in ns}, **{("oracle", n): 10.0 * n for n in ns}})
    checks = mod.verdict(good, ns)
    assert [c["reproduced"] for c in checks] == [True, True, None]  # two claims, then a context row
    assert "n/a" in verdict_table(checks) and "not reproduced" not in verdict_table(checks)
    jagged = summary_rows({**{("uniform", n): 10.0 * n * (8.0**n if n % 2 else 1.0) for n in ns},
                           **{("oracle", n): 10.0 * n for n in ns}})  # fmt: skip
    checks = mod.verdict(jagged, ns)  # the ratio grows on average, but no exponential fits it (R^2 about 0.05)
    assert not checks[0]["reproduced"] and "R^2 0.0" in checks[0]["measured"]


def test_fig1_oracle_never_slower_is_not_decided_by_censored_medians():
    """Both schemes censored at the same cap: equal medians must not count as 'oracle not slower'."""
    mod = load("per_fig1")
    ns = list(range(2, 9))
    medians = {**{("uniform", n): 10 * 4.0**n for n in ns}, **{("oracle", n): 10.0 * n for n in ns}}
    caps = {(label, n): 5000.0 for label in ("uniform", "oracle") for n in (7, 8)}  # both censored at n = 7, 8
    checks = mod.verdict(summary_rows(medians, caps), ns)
    assert not checks[1]["reproduced"]
    assert "undecided (oracle median censored) at n: 7, 8" in checks[1]["measured"]
    assert "not reproduced" in verdict_table(checks)
    # uniform censored (a lower bound) above an exact oracle median still decides "not slower"
    caps = {("uniform", n): 5000.0 for n in (7, 8)}
    assert mod.verdict(summary_rows(medians, caps), ns)[1]["reproduced"]
    # an exact uniform median below a censored oracle median decides "slower"
    caps = {("oracle", 8): 1e6}
    checks = mod.verdict(summary_rows(medians, caps), ns)
    assert not checks[1]["reproduced"] and "slower at n: 8;" in checks[1]["measured"]


def test_fig2_verdict_fails_when_prioritisation_does_not_help():
    mod = load("per_fig2")
    n = 8
    labels = list(mod.templates())
    same = summary_rows({(label, n): 1000.0 for label in labels})
    checks = mod.verdict(same, n)
    assert [c["reproduced"] for c in checks[:3]] == [False, False, False]
    fast = summary_rows({(label, n): 1000.0 if label.endswith("uniform") else 100.0 for label in labels})
    checks = mod.verdict(fast, n)
    assert [c["reproduced"] for c in checks] == [True, True, True, None]  # three claims, then a context row
    one_slow = dict(((label, n), 1000.0 if label.endswith("uniform") else 100.0) for label in labels)
    one_slow[("linear/per-rank a=0.5", n)] = 800.0  # x1.25 only
    checks = mod.verdict(summary_rows(one_slow), n)
    assert checks[1]["reproduced"] and not checks[2]["reproduced"]
    one_slow_prop = dict(((label, n), 1000.0 if label.endswith("uniform") else 100.0) for label in labels)
    one_slow_prop[("linear/per a=0.5", n)] = 800.0  # "for every alpha": one alpha at x1.25 fails it
    checks = mod.verdict(summary_rows(one_slow_prop), n)
    assert not checks[1]["reproduced"] and checks[2]["reproduced"]


def run_rows(values: dict, seeds: int = 10) -> list[dict]:
    """Runs as :func:`run_grid` makes them, from ``{(label, n): per-seed updates}`` (a number: every seed)."""
    rows = []
    for (label, n), v in values.items():
        per = [float(v)] * seeds if isinstance(v, (int, float)) else [float(x) for x in v]
        rows += [{"label": label, "n": n, "seed": s, "updates": u, "censored": False, "cap": 10**9}
                 for s, u in enumerate(per)]  # fmt: skip
    return rows


def test_fig7_verdict_fails_when_pser_is_slower():
    mod = load("pser_fig7")
    ns = [5, 6]
    slow = {(label, n): (2000.0 if "/pser" in label else 1000.0) for label in mod.templates() for n in ns}
    readings = len(mod.Q0S) * len(mod.ETAS)  # each claim is judged once per (Q0, eta)
    checks = mod.verdict([], run_rows(slow), ns)
    faster = [c for c in checks if c["claim"].endswith("] PSER faster than PER")]
    delays = [c for c in checks if c["claim"].endswith("] MaxPrio delays PSER vs CurrentTD")]
    assert len(faster) == len(delays) == readings and len(checks) == 2 * readings
    assert not any(c["reproduced"] for c in faster)
    assert not any(c["reproduced"] for c in delays)  # max == td: no delay
    good = {}
    for label in mod.templates():
        for n in ns:
            good[(label, n)] = 100.0 if "/pser" in label and "init=td" in label else (
                500.0 if "/pser" in label else 1000.0)  # fmt: skip
    checks = mod.verdict([], run_rows(good), ns)
    assert len(checks) == 2 * readings and all(c["reproduced"] is True for c in checks)


def test_fig7_verdict_counts_a_cell_only_where_its_bootstrap_interval_clears_1():
    """Ten seeds whose medians favour PSER by 2 %, with seed-to-seed spread far larger: the bare ratio of
    medians is above 1 in every cell, but no interval clears 1, so neither claim is reproduced."""
    mod = load("pser_fig7")
    ns = [5, 6]
    spread = [600.0, 700.0, 800.0, 900.0, 1000.0, 1000.0, 1100.0, 1200.0, 1300.0, 1400.0]
    noisy = {}
    for label in mod.templates():
        for n in ns:
            faster = "/pser" in label
            noisy[(label, n)] = [x / (1.02 if faster else 1.0) for x in reversed(spread)] if faster else spread
    checks = mod.verdict([], run_rows(noisy), ns)
    faster = [c for c in checks if c["claim"].endswith("] PSER faster than PER")]
    assert all("PER/PSER 1.02..1.02" in c["measured"] and "undecided in 6" in c["measured"] for c in faster)
    assert not any(c["reproduced"] for c in checks)


def test_fewer_seeds_than_the_default_are_named_under_the_verdicts(tmp_path, capsys):
    """Without --quick, a run with fewer seeds than the default's 10 prints one line saying its verdicts can
    differ from the default run's."""
    mod = load("per_fig1")
    assert mod.main(["--seeds", "2", "--out", str(tmp_path / "two"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "--seeds 2: fewer than the defaults" in out and QUICK_CAVEAT not in out
    assert out.index("--seeds 2: fewer") > out.index(" verdict")


def test_fig7_refuses_one_seed_whose_bootstrap_interval_has_no_width(tmp_path, capsys):
    """One seed resampled is the same seed: the interval was the ratio itself, "above 1" by construction, and the
    verdict read "reproduced".  Refused in one line, before anything is written."""
    mod = load("pser_fig7")
    with pytest.raises(SystemExit) as err:
        mod.main(["--quick", "--seeds", "1", "--out", str(tmp_path / "one")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert err.value.code == 2 and len(lines) == 1 and "--seeds 1: each verdict's 95 % bootstrap interval" in lines[0]
    assert not (tmp_path / "one").exists()
