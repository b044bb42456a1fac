"""``scripts/bench_bootstrap.py``: the report's batched bootstrap timed beside rliable's, the same intervals."""

from __future__ import annotations

from theory_scripts import load_script


def test_both_bootstraps_are_timed_and_give_the_same_bytes(capsys):
    script = load_script("bench_bootstrap")
    rows = script.compare(reps=300, runs=4, tasks=2)
    assert [r["statistic"] for r in rows] == ["IQM, mean and median", "P(X > Y)"]
    assert all(r["same"] and r["rliable_s"] > 0 and r["batched_s"] > 0 for r in rows)
    script.main(["--reps", "200", "--runs", "3", "--tasks", "2"])
    out = capsys.readouterr().out
    assert out.count("| True |") == 2 and "3 runs x 2 tasks, 200 replications" in out
