"""optsolve cover's improvement of the repaired cover: redundant elements, exchanges, the MILP polish,
against brute force, hand-made cases with a known answer, and the option that turns it off."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

import optsolve.cover
from optsolve.cover import improve as improve_mod
from optsolve.cover.certificate import set_value
from optsolve.cover.functions import make_function
from optsolve.cover.greedy import convert_fair, reached
from optsolve.cover.improve import exchange, held_set, improve, remove_redundant
from optsolve.cover.picks import Fairness
from optsolve.cover.milp import MILPRun
from optsolve.cover.problems import FAMILIES, SCHEMA, prepare

from test_cover import brute_force_opt, f_of, fair, random_problem


def problem_of(raw):
    return prepare(SCHEMA.validate(raw, source="test"))


def random_move(rng, held, S: list, out, add: bool) -> None:
    """Add a random element of ``out`` (when ``add`` and there is one) or remove a random one of S, in
    ``held`` and in S."""
    if add and len(out):
        e = int(rng.choice(out))
        held.add(e)
        S.append(e)
    else:
        i = int(rng.choice(S))
        held.remove(i)
        S.remove(i)


def state(cp, S):
    return held_set(cp, S), Fairness(cp, S)


@pytest.mark.parametrize("facility", [False, True])
def test_losses_and_gains_follow_the_set_through_removals_and_additions(facility):
    rng = np.random.default_rng(3)
    cp = prepare(random_problem(3, n=14, items=20, facility=facility))
    S = sorted(rng.choice(cp.n, 9, replace=False).tolist())
    held = held_set(cp, S)
    for step in range(12):
        assert held.value == pytest.approx(f_of(cp, S), abs=1e-9)
        idx = np.asarray(S)
        want = [f_of(cp, S) - f_of(cp, [e for e in S if e != i]) for i in S]
        assert held.losses(idx) == pytest.approx(want, abs=1e-9)
        assert [held.loss(i) for i in S] == pytest.approx(want, abs=1e-9)
        out = np.asarray([e for e in range(cp.n) if e not in S])
        assert held.gains(out) == pytest.approx([f_of(cp, S + [e]) - f_of(cp, S) for e in out], abs=1e-9)
        random_move(rng, held, S, out, step % 3 == 2)


def test_a_redundant_element_is_removed_and_a_needed_one_kept():
    # element 1 covers only what element 0 covers; 0 and 2 are each the only cover of an item
    cp = problem_of({"cover": [[1, 1, 0], [0, 1, 0], [0, 0, 1]], "groups": [0, 0, 0], "p": [0.0], "q": [1.0],
                     "tau": 3})
    held, fairness = state(cp, [0, 1, 2])
    assert remove_redundant(cp, held, fairness, [0, 1, 2], cp.tau, reached) == [0, 2]
    assert held.value == 3


def test_removal_goes_cheapest_loss_first_and_stops_at_the_target():
    # losses 1, 2, 3 and a slack of 3: cheapest first drops 0 and 1 (the costliest first would stop after 2)
    cp = problem_of({"cover": [[1, 0, 0], [0, 1, 0], [0, 0, 1]], "weights": [1.0, 2.0, 3.0], "groups": [0, 0, 0],
                     "p": [0.0], "q": [1.0], "tau": 3})
    held, fairness = state(cp, [0, 1, 2])
    assert remove_redundant(cp, held, fairness, [0, 1, 2], cp.tau, reached) == [2]
    held, fairness = state(cp, [0, 1])
    assert remove_redundant(cp, held, fairness, [0, 1], cp.tau, reached) == [0, 1]  # loss 1 > slack 0


def test_removal_keeps_the_proportions_of_the_smaller_set():
    # groups 0 and 1 with p = q = 1/2: only even sizes are fair, so no single removal is allowed
    cp = problem_of({"cover": [[1, 0], [0, 1], [1, 0], [0, 1]], "groups": [0, 1, 0, 1], "balance": 0.0, "tau": 2})
    held, fairness = state(cp, [0, 1, 2, 3])
    assert remove_redundant(cp, held, fairness, [0, 1, 2, 3], cp.tau, reached) == [0, 1, 2, 3]
    # ... but the pair (one of each group) goes in an exchange of two for none
    S, removed = exchange(cp, held, fairness, [0, 1, 2, 3], cp.tau, reached, until=float("inf"))
    assert removed == 2 and fair(cp, S) and f_of(cp, S) >= 2


def test_removal_only_from_the_groups_the_smaller_size_allows():
    # p = 0.3, q = 0.7 for two groups: a set of 2 holds one of each. Element 0 (group 0) has the cheapest
    # loss (0) but its group may not shrink; element 2 (group 1, loss 0.5 = the slack) goes instead
    cp = problem_of({"cover": [[1, 0, 0], [1, 1, 0], [0, 0, 1]], "weights": [1.0, 1.0, 0.5], "groups": [0, 1, 1],
                     "p": [0.3, 0.3], "q": [0.7, 0.7], "tau": 2})
    held, fairness = state(cp, [0, 1, 2])
    assert list(held.losses(np.array([0, 1, 2]))) == [0.0, 1.0, 0.5]
    S = remove_redundant(cp, held, fairness, [0, 1, 2], cp.tau, reached)
    assert S == [0, 1] and fair(cp, S) and f_of(cp, S) >= 2


def test_a_two_for_one_exchange_where_removal_cannot():
    # 0 and 1 each cover two items, 3 covers all four, 2 alone covers the fifth: no single removal,
    # one exchange of 0 and 1 for 3
    cp = problem_of({"cover": [[1, 1, 0, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 0, 1], [1, 1, 1, 1, 0]],
                     "groups": [0, 0, 0, 0], "p": [0.0], "q": [1.0], "tau": 5})
    held, fairness = state(cp, [0, 1, 2])
    assert remove_redundant(cp, held, fairness, [0, 1, 2], cp.tau, reached) == [0, 1, 2]
    S, removed = exchange(cp, held, fairness, [0, 1, 2], cp.tau, reached, until=float("inf"))
    assert sorted(S) == [2, 3] and removed == 1 and held.value == 5


def test_facility_location_redundant_site():
    # site 1 serves client 0 worse than site 0 does: it is redundant
    cp = problem_of({"sim": [[1.0, 1.0, 0.0], [0.5, 0.0, 0.0], [0.0, 0.0, 1.0]], "groups": [0, 0, 0],
                     "p": [0.0], "q": [1.0], "tau": 3})
    fn = make_function(cp)
    S, report = improve(cp, fn, [0, 1, 2], cp.tau, polish=False)
    assert sorted(S) == [0, 2] and report.removed == 1 and fn.value == pytest.approx(3.0)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("facility", [False, True])
@pytest.mark.parametrize("method", ["greedy", "threshold"])
def test_improved_covers_are_fair_reach_tau_never_grow_and_match_the_optimum(seed, facility, method):
    problem = random_problem(seed, n=10, items=14, facility=facility, tau_frac=0.7)
    cp = prepare(problem)
    opt = brute_force_opt(cp, cp.tau)
    off = optsolve.cover.solve_problem(problem, method=method, improve=False)
    on = optsolve.cover.solve_problem(problem, method=method)
    if opt is None:
        assert on.status.value == off.status.value != "optimal"
        return
    assert on.status.value == "optimal" and on.certificate.holds, on.message
    S = on.solution["selected"]
    assert fair(cp, S) and f_of(cp, S) >= cp.tau - 1e-9
    assert len(S) <= off.objective
    # on instances this small the polish decides: the optimum itself, or the heuristic's set proven optimal
    assert on.stats["improved"]["milp"] in ("proved", "optimal")
    assert len(S) == opt


@pytest.mark.parametrize("method", ["greedy", "threshold", "continuous"])
def test_the_option_off_gives_the_old_answer(method):
    data = FAMILIES["sbm"].generate(np.random.default_rng(0), **{**FAMILIES["sbm"].defaults(), "n": 400})
    problem = SCHEMA.validate(data, source="sbm")
    cp = prepare(problem, tau_frac=0.8, balance=0.2)
    res = optsolve.cover.solve_problem(problem, method=method, tau_frac=0.8, balance=0.2, improve=False)
    assert "improved" not in res.stats and res.certificate.holds
    if method != "continuous":  # continuous keeps its redundancy removal
        old = convert_fair(cp, make_function(cp), method=method)
        assert res.solution["selected"] == [int(i) for i in old.selected]
    on = optsolve.cover.solve_problem(problem, method=method, tau_frac=0.8, balance=0.2)
    assert on.certificate.holds and on.objective <= res.objective
    done = on.stats["improved"]
    if method != "continuous":
        assert done["removed"] + done["exchanged"] + done["polished"] == res.objective - on.objective


def test_an_sbm_cover_greedy_got_too_large_comes_within_5_percent():
    data = FAMILIES["sbm"].generate(np.random.default_rng(0), **{**FAMILIES["sbm"].defaults(), "n": 400, "groups": 3})
    problem = SCHEMA.validate(data, source="sbm")
    kw = dict(tau_frac=0.8, balance=0.5)
    opt = optsolve.cover.solve_problem(problem, method="milp", **kw)
    assert opt.status.value == "optimal"
    off = optsolve.cover.solve_problem(problem, method="greedy", improve=False, **kw)
    on = optsolve.cover.solve_problem(problem, method="greedy", **kw)
    assert off.objective > 1.05 * opt.objective
    assert on.objective <= 1.05 * opt.objective and on.certificate.holds


def test_a_milp_set_that_fails_the_exact_check_is_rejected(monkeypatch):
    problem = random_problem(1, n=10, items=14, tau_frac=0.7)
    cp = prepare(problem)
    fn = make_function(cp)
    run = convert_fair(cp, fn, method="greedy")
    heuristic = list(run.selected)
    unfair = [i for i in range(cp.n) if cp.groups[i] == cp.groups[heuristic[0]]][:1]  # one element: short of tau
    monkeypatch.setattr("optsolve.cover.milp.solve_milp", lambda *a, **k: MILPRun(unfair, "optimal", 1.0))
    fn = make_function(cp)
    for e in heuristic:
        fn.add(e)
    S, report = improve(cp, fn, heuristic, cp.tau, exchanges=False)
    assert report.milp == "rejected" and report.polished == 0
    assert len(S) <= len(heuristic) and fair(cp, S) and f_of(cp, S) >= cp.tau - 1e-9
    assert fn.value == pytest.approx(f_of(cp, S))  # fn left at the returned set


def test_the_polish_is_skipped_above_its_size(monkeypatch):
    monkeypatch.setattr(improve_mod, "POLISH_MAX_ENTRIES", 0)
    problem = random_problem(2, n=10, items=14, tau_frac=0.7)
    res = optsolve.cover.solve_problem(problem, method="greedy")
    assert res.stats["improved"]["milp"] == "skipped" and res.certificate.holds


def test_no_time_left_changes_nothing():
    problem = random_problem(4, n=10, items=14, tau_frac=0.7)
    cp = prepare(problem)
    fn = make_function(cp)
    S0 = list(convert_fair(cp, fn, method="greedy").selected)
    S, report = improve(cp, fn, S0, cp.tau, deadline=0.0)
    assert S == S0 and report.removed == report.exchanged == report.polished == 0


def test_command_line_no_improve_and_verify_without_it(cli, tmp_path):
    path, sol, sol_off = tmp_path / "sbm.npz", tmp_path / "on.json", tmp_path / "off.json"
    assert cli("gen", "cover", "--family", "sbm", "--n", "300", "--seed", "2", "-o", path).exit_code == 0
    assert cli("cover", path, "-o", sol, "--tau-frac", "0.8").exit_code == 0
    r = cli("cover", path, "-o", sol_off, "--tau-frac", "0.8", "--no-improve")
    assert r.exit_code == 0, r.stderr
    on, off = json.loads(sol.read_text()), json.loads(sol_off.read_text())
    assert off["settings"]["improve"] is False and "improved" not in off["stats"]
    assert on["objective"] <= off["objective"] and "improve" in on["stats"]["time_s"]
    for doc in (sol, sol_off):
        assert cli("verify", path, doc, "--tau-frac", "0.8").exit_code == 0


def test_an_interrupt_returns_the_input_cover(monkeypatch):
    problem = random_problem(5, n=10, items=14, tau_frac=0.7)
    cp = prepare(problem)
    fn = make_function(cp)
    S0 = list(convert_fair(cp, fn, method="greedy").selected)

    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(improve_mod, "exchange", stop)
    S, report = improve(cp, fn, S0, cp.tau)
    assert S == S0 and report.interrupted and report.as_stats()["interrupted"]
    assert fn.value == pytest.approx(f_of(cp, S0))


def planted(seed, blocks=100, size=100, noise=1000, mean=90):
    """Items split into ``blocks`` random disjoint blocks of ``size`` (the planted sets) and ``noise`` random
    sets of 1 + Poisson(mean) items, in a random order, no proportions; the threshold half the items, which
    half the blocks cover. The greedy takes the largest noise sets first and overshoots the planted size."""
    rng = np.random.default_rng(seed)
    items = blocks * size
    perm = rng.permutation(items)
    rows = [perm[b * size:(b + 1) * size] for b in range(blocks)]
    rows += [rng.choice(items, size=int(np.clip(rng.poisson(mean), 1, 2 * size)), replace=False) for _ in range(noise)]
    rows = [np.sort(rows[k]) for k in rng.permutation(len(rows))]
    indptr = np.concatenate([[0], np.cumsum([r.size for r in rows])])
    inc = sp.csr_matrix((np.ones(indptr[-1]), np.concatenate(rows), indptr), shape=(len(rows), items))
    return problem_of({"cover": inc, "groups": rng.integers(0, 2, len(rows)), "p": [0.0, 0.0], "q": [1.0, 1.0],
                       "tau": float(items // 2)})


@pytest.mark.parametrize("seed", range(3))
def test_swaps_reach_the_planted_size_where_the_greedy_overshoots(seed):
    from optsolve.cover.swaps import CoverageSwaps, swap_and_remove

    cp = planted(seed)
    fn = make_function(cp)
    S = convert_fair(cp, fn).selected
    assert len(S) > 50  # the planted cover: half the 100 blocks
    held, fairness = state(cp, S)
    out, swaps, removed = swap_and_remove(cp, fn, held, fairness, S, cp.tau, reached, float("inf"))
    assert len(out) == len(S) - removed <= 50 and swaps > 0 and len(set(out)) == len(out)
    value = set_value(cp, out)
    assert reached(value, cp.tau) and held.value == pytest.approx(value)
    # the kept gains and losses at the end are the definitions
    moved = CoverageSwaps(cp, fn, held_set(cp, out), out)
    for e in np.random.default_rng(seed).choice(cp.n, 40, replace=False).tolist():
        if e in out:
            assert moved.loss[e] == pytest.approx(value - set_value(cp, [i for i in out if i != e]))
        else:
            assert moved.gain[e] == pytest.approx(set_value(cp, out + [e]) - value)


def test_kept_gains_and_losses_follow_swaps_and_removals():
    from optsolve.cover.swaps import CoverageSwaps

    cp = planted(1, blocks=6, size=5, noise=10, mean=4)
    fn = make_function(cp)
    rng = np.random.default_rng(0)
    S = sorted(rng.choice(cp.n, 12, replace=False).tolist())
    held = held_set(cp, S)
    fn.covering()
    moves = CoverageSwaps(cp, fn, held, S)
    for step in range(20):
        random_move(rng, moves, S, [e for e in range(cp.n) if e not in S], step % 2 == 1)
        for i in S:
            assert moves.loss[i] == pytest.approx(f_of(cp, S) - f_of(cp, [e for e in S if e != i]), abs=1e-9)
        for e in range(cp.n):
            if e not in S:
                assert moves.gain[e] == pytest.approx(f_of(cp, S + [e]) - f_of(cp, S), abs=1e-9)
