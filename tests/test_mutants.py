"""The mutation check's targets (scripts/mutants.py) stay in step with the code: each mutant's text is found
exactly once where it points, and the tests it names exist.  An edit that moves a target would otherwise stop
`make mutants` before any mutant ran."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _mutants_module():
    spec = importlib.util.spec_from_file_location("mutants_script", ROOT / "scripts" / "mutants.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def test_every_mutant_finds_its_target_once_and_names_existing_tests():
    m = _mutants_module()
    assert len(m.MUTANTS) >= 50
    assert m.check_targets(m.MUTANTS) == []
    for mutant in m.MUTANTS:
        assert mutant.old != mutant.new, mutant.name
        for test in mutant.tests:
            assert (ROOT / test.split("::")[0]).exists(), (mutant.name, test)


def test_an_only_pattern_that_matches_no_mutant_is_refused_before_anything_runs(capsys, monkeypatch):
    """It listed nothing with --list, and without it ran the whole unmutated suite before failing."""
    import pytest

    m = _mutants_module()
    monkeypatch.setattr(m, "copy_repository", lambda dest: pytest.fail("the repository was copied"))
    for argv in (["--list"], []):
        with pytest.raises(SystemExit) as stop:
            m.main(["--only", "tree_update", "NOMATCH", *argv])
        err = capsys.readouterr().err.strip().splitlines()
        assert stop.value.code == 2 and len(err) == 1
        assert err[0].endswith(": error: --only NOMATCH matches no mutant (--list names them)")
    assert m.main(["--only", "tree_update", "--list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed and all(line.startswith("tree_update: ") for line in listed)


def test_a_timeout_that_is_not_a_finite_positive_number_is_refused_before_anything_runs(capsys, monkeypatch):
    """nan never times a pytest run out, and inf or a negative number waits for ever or not at all."""
    import pytest

    m = _mutants_module()
    monkeypatch.setattr(m, "copy_repository", lambda dest: pytest.fail("the repository was copied"))
    for value in ("nan", "inf", "-1", "0"):
        with pytest.raises(SystemExit) as stop:
            m.main(["--only", "tree_update", "--timeout", value])
        err = capsys.readouterr().err.strip().splitlines()
        assert stop.value.code == 2 and len(err) == 1
        assert err[0].endswith(f": error: --timeout must be a finite number of seconds above 0, got {float(value)}")
