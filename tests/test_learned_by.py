"""``scripts/learned_by.py``: ``deep/minatar_budget.py``'s criterion applied to run folders, frame by frame."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from theory_scripts import load_script

STUDY = Path(__file__).resolve().parents[1] / "docs" / "results" / "minatar_study" / "runs"


def test_the_criterion_sorts_the_studys_seed_0_runs_as_the_specification_says(capsys):
    """The specification's claim: Breakout and SpaceInvaders pass at 250k frames, Asterix, Seaquest and Freeway
    do not (the committed seed-0 runs with uniform replay)."""
    script = load_script("learned_by")
    games = ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")
    assert script.main([str(STUDY / f"dqn_MinAtar-{g}-v1_uniform_s0") for g in games]) == 0
    rows = {line.split(" | ")[0][2:]: line.split(" | ")[-1].strip(" |") for line in capsys.readouterr().out.splitlines()
            if line.startswith("| dqn_")}  # fmt: skip
    assert rows == {f"dqn_MinAtar-{g}-v1_uniform_s0": "yes" if g in ("Breakout", "SpaceInvaders") else "no"
                    for g in games}  # fmt: skip


def test_first_frame_is_where_the_window_first_reaches_the_bound():
    script = load_script("learned_by")
    steps = 25_000 * np.arange(1, 23)
    returns = np.array([0.0] * 12 + [5.0] * 10)  # random 0.3: bound max(0.9, 1.3) = 1.3, three 5s in a window
    first, last = script.learned_by(steps, returns, 0.3)
    assert script.bound(0.3) == 1.3 and first == int(steps[14]) and last == 5.0
    assert script.learned_by(steps[:9], returns[:9], 0.3)[0] is None  # fewer evaluations than a window
    assert script.bound(4.08) == 3 * 4.08  # the ratio binds above random play 0.5



def test_the_printed_bound_is_the_one_the_results_quote(capsys):
    """Random play's scores have 3 decimals (Seaquest 0.075, Freeway 0.355): so has the bound, as the results
    quote it (1.075, 1.355), not rounded to 1.07 / 1.35."""
    script = load_script("learned_by")
    probes = Path(__file__).resolve().parents[1] / "docs" / "results" / "minatar_budget" / "runs"
    games = ("Asterix", "Freeway", "Seaquest")
    assert script.main([str(probes / f"dqn_MinAtar-{g}-v1_uniform_s0") for g in games]) == 0
    bounds = {line.split(" | ")[0][2:]: line.split(" | ")[2] for line in capsys.readouterr().out.splitlines()
              if line.startswith("| dqn_")}  # fmt: skip
    assert bounds == {"dqn_MinAtar-Asterix-v1_uniform_s0": "1.435", "dqn_MinAtar-Freeway-v1_uniform_s0": "1.355",
                      "dqn_MinAtar-Seaquest-v1_uniform_s0": "1.075"}  # fmt: skip

@pytest.mark.parametrize(("agent", "env"), [("td3", "Hopper-v5"), ("dqn", "MinAtar/Breakout-v0")])
def test_a_run_that_is_not_minatar_is_a_one_line_error(tmp_path, capsys, agent, env):
    """A -v0 game is refused too: random play there, over all 6 actions, is not the -v1 score the bound uses."""
    script = load_script("learned_by")
    folder = tmp_path / f"{agent}_{env.replace('/', '-')}_uniform_s0"
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"config": {"agent": agent, "env": env,
                                                                 "sampler": "uniform", "seed": 0, "steps": 100}}))
    (folder / "evaluations.csv").write_text("step,return_mean\n100,1.0\n")
    assert script.main([str(folder)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and f"{env} is not a MinAtar game with a random-play score" in lines[0]


def test_the_long_studys_budgets_reach_past_where_the_probe_learned_each_game():
    """``deep/minatar_study_long.py`` runs the games the 250k-frame study leaves out, each for at least the frames
    at which the committed probe run (``docs/results/minatar_budget``) met the criterion, plus a final-score
    window (the study's last 10 evaluations) after it."""
    from prioritylab.harness.report.runs import column, read_run
    from prioritylab.harness.sweep import load_module, load_spec
    from prioritylab.scores import MINATAR_RANDOM

    script = load_script("learned_by")
    deep = Path(__file__).resolve().parents[1] / "deep"
    long, study = load_module(deep / "minatar_study_long.py"), load_module(deep / "minatar_study.py")
    assert set(long.FRAMES) == set(study.GAMES) - set(study.LEARNED_BY_250K) == set(script.SPEC.GAMES)
    probes = Path(__file__).resolve().parents[1] / "docs" / "results" / "minatar_budget" / "runs"
    window = script.SPEC.LEARNED_WINDOW * study.REDUCED["eval_every"]
    for game, frames in long.FRAMES.items():
        run = read_run(probes / f"dqn_MinAtar-{game}-v1_uniform_s0")
        first, _ = script.learned_by(column(run["rows"], "step"), column(run["rows"], "return_mean"),
                                     MINATAR_RANDOM[game])  # fmt: skip
        assert first is not None and first + window <= frames, game
    runs = load_spec(deep / "minatar_study_long.py", "reduced")
    assert {(r["env"], r["sampler"], r["steps"]) for r in runs} == {
        (f"MinAtar/{g}-v1", s, f) for g, f in long.FRAMES.items() for s in study.SAMPLERS}
    # the study's settings, but LAP's and PAL's kappa and the PSER rule its first runs pinned
    pinned = {**{s: {"replay.kappa": k} for s, k in long.KAPPA.items()}, "pser": study.PSER_EACH}
    assert all({k: v for k, v in r.items() if k not in ("env", "sampler", "steps")} == {
        "agent": "dqn", **{k: v for k, v in study.REDUCED.items() if k != "steps"}, **pinned.get(r["sampler"], {})}
        for r in runs)  # fmt: skip
    assert long.KAPPA == {"lap": 1.0, "pal": 1.0}


def test_the_help_says_what_a_run_folder_is(capsys):
    with pytest.raises(SystemExit) as stop:
        load_script("learned_by").main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert stop.value.code == 0 and "RUN_FOLDER a MinAtar run's folder as prioritylab train writes it" in text


def test_a_run_at_other_settings_than_random_play_was_measured_at_is_a_one_line_error(tmp_path, capsys):
    """Random Freeway scores about 0.16 at a 1,000-step cap, not the 0.355 the bound would be built on."""
    import shutil

    script = load_script("learned_by")
    probe = Path(__file__).resolve().parents[1] / "docs" / "results" / "minatar_budget" / "runs"
    folder = tmp_path / "dqn_MinAtar-Freeway-v1_uniform_s0"
    shutil.copytree(probe / folder.name, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["config"]["max_episode_steps"] = 1000
    (folder / "manifest.json").write_text(json.dumps(manifest))
    assert script.main([str(folder)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "it ran at max_episode_steps 1000 (measured at 10000)" in lines[0]
