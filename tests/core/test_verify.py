"""``optsolve verify``: what it judges whatever the command (limits, status, the document's shape)."""

from __future__ import annotations

import json

import pytest

from optsolve.core.result import Certificate, Check, Limit


@pytest.fixture
def solved(cli, small_ot, tmp_path):
    path, _ = small_ot
    sol = tmp_path / "sol.json"
    r = cli("ot", path, "--method", "emd", "-o", sol)
    assert r.exit_code == 0, r.stderr
    return path, sol, json.loads(sol.read_text())




def test_untouched_document_holds(cli, solved):
    problem, sol, _ = solved
    r = cli("verify", problem, sol)
    assert r.exit_code == 0, r.stderr
    report = r.json()
    assert report["holds"] is True and report["checks"][-1]["name"] == "status_claim"
    assert all(c["holds"] is None or c["limit"] is not None for c in report["checks"])
    assert "limits" in report and "reported_settings" in report


@pytest.mark.parametrize("status", ["infeasible", "unbounded", "awesome", None])
def test_claimed_status_is_judged(cli, solved, tmp_path, status, verify_forged):
    problem, _, doc = solved
    doc["status"] = status
    r = verify_forged(problem, doc)
    assert r.exit_code == 6, r.stderr
    claim = r.json()["checks"][-1]
    assert claim["name"] == "status_claim" and claim["holds"] is False


@pytest.mark.parametrize("status", ["max_iter", "time_limit", "interrupted"])
def test_status_without_a_claim_is_information(cli, solved, tmp_path, status, verify_forged):
    problem, _, doc = solved
    doc["status"] = status
    r = verify_forged(problem, doc)
    claim = r.json()["checks"][-1]
    assert claim["name"] == "status_claim" and claim["holds"] is None and claim["limit"] is None


@pytest.mark.parametrize("sha", [None, "0" * 64])
def test_problem_hash_is_required(cli, solved, tmp_path, sha, verify_forged):
    problem, _, doc = solved
    doc["problem"]["sha256"] = sha
    r = verify_forged(problem, doc)
    assert r.exit_code == 6
    first = r.json()["checks"][0]
    assert first["name"] == "problem_sha256_matches" and first["holds"] is False


@pytest.mark.parametrize("text, needle", [
    ('{"schema": "optsolve.solution/1", "x": NaN}', "NaN"),
    ("[" * 5000 + "]" * 5000, "nested 5000 deep"),
    ('{"schema": "optsolve.solution/1", "command": "ot", "solution": {"f": ' + "[" * 200 + "]" * 200 + "}}",
     "nested"),
])
def test_malformed_documents_exit_7(cli, solved, tmp_path, text, needle, verify_forged):
    problem, _, _ = solved
    r = verify_forged(problem, text)
    assert r.exit_code == 7 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_solution_that_does_not_fit_exits_7(cli, solved, tmp_path, verify_forged):
    problem, _, doc = solved
    doc["solution"] = {k: {"nested": "object"} for k in doc["solution"]}
    r = verify_forged(problem, doc)
    assert r.exit_code == 7 and "Traceback" not in r.stderr, r.stderr


def test_unknown_limit_option_is_a_usage_error(cli, solved):
    problem, sol, _ = solved
    r = cli("verify", problem, sol, "--no-such-option", "3")
    assert r.exit_code == 2 and "--no-such-option" in r.stderr and "limit options of ot" in r.stderr


def test_information_never_holds():
    info = Check.info("guarantee", 1.5, "assumes the label error rate")
    assert info.holds is None and info.limit is None and info.to_dict()["holds"] is None
    assert not Certificate([info]).holds  # nothing judged: no claim established
    assert Certificate([info, Check.at_most("r", 0.1, 1.0)]).holds
    assert not Certificate([info, Check.at_most("r", 2.0, 1.0)]).holds
    judged = Check("flag", True, None, True)
    assert judged.limit == "true" and judged.holds is True  # a judged condition states what it was judged on
    assert not Check.at_most("r", float("nan"), 1.0).holds and not Check.at_least("r", None, 0.0).holds
    assert Check.require("n", 3, True, "> 0").to_dict()["limit"] == "> 0"


def test_limit_direction():
    tol = Limit("tol", 1e-6)
    assert tol.is_looser(1e-3, 1e-6) and not tol.is_looser(1e-8, 1e-6) and tol.is_looser("1e-8", 1e-6)
    level = Limit("tau", 1.0, looser="smaller")
    assert level.is_looser(0.5, 1.0) and not level.is_looser(2.0, 1.0) and level.is_looser(float("nan"), 1.0)
    assert tol.option == "--tol" and Limit("eps_abs", 1e-3).option == "--eps-abs"


def test_problem_of_another_command_is_one_line(cli, solved, tmp_path, verify_forged):
    """A document of another command: verify refuses the problem in one line, without warnings on stderr."""
    problem, _, doc = solved
    doc["command"] = "qp"
    r = verify_forged(problem, doc)
    assert r.exit_code == 7 and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_solution_from_an_endless_device_is_bounded(cli, solved):
    """A solution 'file' with no size to check first (a device) is read only up to the budget."""
    problem, _, _ = solved
    r = cli("verify", problem, "/dev/zero", env={"OPTSOLVE_MEMORY_LIMIT": "16M"})
    assert r.exit_code == 7 and "memory budget" in r.stderr, r.stderr
