"""The PER / PSER Blind Cliffwalk reproduction scripts: --quick runs, and verdicts that can fail."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load(name):
    spec = importlib.util.spec_from_file_location(f"theory_{name}", ROOT / "theory" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def summary_rows(medians: dict) -> list[dict]:
    """A summary as :func:`summarise` makes it, from ``{(label, n): median}``."""
    return [
        {"label": label, "n": n, "memory_size": 2 ** (n + 1) - 2, "seeds": 3, "median": float(m), "min": float(m),
         "max": float(m), "censored": 0, "median_is_lower_bound": False}
        for (label, n), m in medians.items()
    ]  # fmt: skip


@pytest.mark.parametrize("name", ["per_fig1", "per_fig2", "pser_fig7"])
def test_quick_mode_writes_files_and_a_verdict(name, tmp_path, capsys):
    mod = load(name)
    assert mod.main(["--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    files = {p.name for p in tmp_path.iterdir()}
    assert "manifest.json" in files
    assert any(f.endswith(".csv") for f in files) and any(f.endswith(".png") for f in files)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["verdict"] and all("reproduced" in c for c in manifest["verdict"])
    out = capsys.readouterr().out
    assert "reproduced" in out and mod.CLAIM in out


def test_fig1_verdict_fails_without_exponential_advantage():
    mod = load("per_fig1")
    ns = list(range(2, 9))
    flat = summary_rows({**{("uniform", n): 100.0 * n for n in ns}, **{("oracle", n): 50.0 * n for n in ns}})
    checks = mod.verdict(flat, ns)
    assert not checks[0]["reproduced"] and checks[1]["reproduced"]
    worse = summary_rows({**{("uniform", n): 10.0 * n for n in ns}, **{("oracle", n): 2.0**n for n in ns}})
    assert not mod.verdict(worse, ns)[1]["reproduced"]
    good = summary_rows({**{("uniform", n): 10 * 4.0**n for n in ns}, **{("oracle", n): 10.0 * n for n in ns}})
    assert all(c["reproduced"] for c in mod.verdict(good, ns))


def test_fig2_verdict_fails_when_prioritisation_does_not_help():
    mod = load("per_fig2")
    n = 8
    labels = list(mod.templates())
    same = summary_rows({(label, n): 1000.0 for label in labels})
    checks = mod.verdict(same, n)
    assert [c["reproduced"] for c in checks[:3]] == [False, False, False]
    fast = summary_rows({(label, n): 1000.0 if label.endswith("uniform") else 100.0 for label in labels})
    assert all(c["reproduced"] for c in mod.verdict(fast, n))
    one_slow = dict(((label, n), 1000.0 if label.endswith("uniform") else 100.0) for label in labels)
    one_slow[("linear/per-rank a=0.5", n)] = 800.0  # x1.25 only
    checks = mod.verdict(summary_rows(one_slow), n)
    assert checks[1]["reproduced"] and not checks[2]["reproduced"]


def test_fig7_verdict_fails_when_pser_is_slower():
    mod = load("pser_fig7")
    ns = [5, 6]
    slow = {(label, n): (2000.0 if "/pser" in label else 1000.0) for label in mod.templates() for n in ns}
    checks = mod.verdict(summary_rows(slow), ns)
    assert not any(c["reproduced"] for c in checks if "faster than PER" in c["claim"])
    assert not any(c["reproduced"] for c in checks if "MaxPrio" in c["claim"])  # max == td: no delay
    good = {}
    for label in mod.templates():
        for n in ns:
            good[(label, n)] = 100.0 if "/pser" in label and "init=td" in label else (
                500.0 if "/pser" in label else 1000.0)  # fmt: skip
    assert all(c["reproduced"] for c in mod.verdict(summary_rows(good), ns))
