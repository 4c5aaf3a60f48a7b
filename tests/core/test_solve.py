"""The one solve pipeline (optsolve.core.solve) and the shape every solver package gives it."""

import importlib
import inspect
import time

import pytest

from optsolve.core import clock
from optsolve.core.errors import ParameterError
from optsolve.catalogue import KINDS
from optsolve.core.result import Certificate, Check, Status
from optsolve.core.solve import Entry, Job, MethodOutput, Solver, entry, run


class Toy(Solver):
    """x = the problem's value, or an infeasibility found before any method when it is negative."""

    command = "toy"
    default_method = "copy"

    def __init__(self):
        self.calls = []
        self.methods = {"copy": entry(self.copy, "the value"), "slow": entry(self.slow, "the value, late")}

    def setup(self, problem, method, options, deadline, progress):
        if options["scale"] <= 0:
            raise ParameterError("The '--scale' option must be positive.")
        self.calls.append(("setup", options["time_limit"], deadline))
        return Job(method, problem["value"] * options["scale"], {"scale": options["scale"]}, None,
                   deadline=deadline, progress=progress)

    def screen(self, job):
        if job.data < 0:
            return MethodOutput("infeasible", {"reason": "negative"}, "Infeasible: negative.", iterations=0)
        return None

    def copy(self, job):
        return MethodOutput(Status.OPTIMAL, {"x": job.data}, objective=job.data, iterations=3, evaluations=7,
                            stats={"own": 1, "time_s": {"inner": 0.5, "skipped": None}})

    def slow(self, job):
        stop = Status.TIME_LIMIT if job.deadline.at is not None and job.deadline.at < time.perf_counter() + 10 else None
        return MethodOutput(stop or Status.OPTIMAL, {"x": job.data}, objective=job.data)

    def certify(self, job, result, out):
        self.calls.append(("certify", result.status.value))
        holds = result.solution.get("x", 0) < 100
        return Certificate([Check("x_small", result.solution.get("x", 0), 100, holds)])

    def judge(self, job, result):
        self.calls.append(("judge", result.certificate.holds))


def test_a_method_output_becomes_a_document_with_the_common_keys():
    toy = Toy()
    result = run(toy, {"value": 2.0}, scale=3.0)
    assert result.command == "toy" and result.method == "copy" and result.status is Status.OPTIMAL
    assert result.solution == {"x": 6.0} and result.objective == 6.0 and result.settings == {"scale": 3.0, "threads": "all"}
    stats = result.stats
    assert stats["iterations"] == 3 and stats["evaluations"] == 7 and stats["own"] == 1
    assert set(stats["time_s"]) == {"prepare", "solve", "inner", "certificate"}  # None times are left out
    assert [c[0] for c in toy.calls] == ["setup", "certify", "judge"]
    doc = result.to_dict()
    assert list(doc["stats"])[:2] == ["iterations", "evaluations"]
    assert {"load", "solve", "certificate", "total"} <= set(doc["stats"]["time_s"])


def test_a_failed_certificate_downgrades_optimal_and_judge_sees_it():
    toy = Toy()
    result = run(toy, {"value": 200.0}, scale=1.0)
    assert result.status is Status.OPTIMAL_INACCURATE and "x_small" in result.message
    assert toy.calls[-1] == ("judge", False)


def test_screen_answers_before_any_method():
    toy = Toy()
    toy.methods["copy"] = entry(lambda job: pytest.fail("the method ran"), "fails")
    result = run(toy, {"value": -1.0}, scale=1.0)
    assert result.status is Status.INFEASIBLE and result.solution == {"reason": "negative"}


def test_no_solution_no_certificate():
    toy = Toy()
    toy.methods["copy"] = entry(lambda job: MethodOutput("max_iter", None, "Nothing found."), "finds nothing")
    result = run(toy, {"value": 1.0}, scale=1.0)
    assert result.certificate is None and result.status is Status.MAX_ITER
    assert [c[0] for c in toy.calls] == ["setup"]


def test_unknown_method_bad_time_limit_and_a_gpu_are_refused_before_setup():
    toy = Toy()
    with pytest.raises(ParameterError, match=r"Unknown method 'nope'; expected one of \['copy', 'slow'\]"):
        run(toy, {"value": 1.0}, method="nope", scale=1.0)
    with pytest.raises(ParameterError, match="'--time-limit'"):
        run(toy, {"value": 1.0}, time_limit=-1.0, scale=1.0)
    with pytest.raises(ParameterError, match="toy"):
        run(toy, {"value": 1.0}, device="gpu", scale=1.0)
    assert toy.calls == []


def test_the_time_limit_counts_from_the_call_and_reaches_the_method():
    toy = Toy()
    before = time.perf_counter()
    result = run(toy, {"value": 1.0}, method="slow", time_limit=5.0, scale=1.0)
    _, limit, deadline = toy.calls[0]
    assert isinstance(deadline, clock.Deadline)  # the one deadline type every job carries
    assert limit == 5.0 and before + 5.0 <= deadline.at <= time.perf_counter() + 5.0
    assert result.status is Status.TIME_LIMIT
    assert clock.spent() == 0.0  # the clock started for the call is stopped after it


def test_an_alias_is_accepted_and_resolved_by_setup():
    class Aliased(Toy):
        aliases = ("best",)

        def setup(self, problem, method, options, deadline, progress):
            job = super().setup(problem, method, options, deadline, progress)
            job.method = "copy" if method == "best" else method
            return job

    solver = Aliased()
    assert solver.method_names == ("best", "copy", "slow")
    result = run(solver, {"value": 1.0}, method="best", scale=1.0)
    assert result.method == "copy" and result.status is Status.OPTIMAL
    with pytest.raises(ParameterError, match=r"expected one of \['best', 'copy', 'slow'\]"):
        run(solver, {"value": 1.0}, method="worst", scale=1.0)


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_package_runs_through_the_pipeline(kind):
    pkg = importlib.import_module(f"optsolve.{kind}")
    assert isinstance(pkg.SOLVER, Solver) and pkg.SOLVER.command == kind
    assert pkg.SOLVER.methods is pkg.METHODS and pkg.DEFAULT_METHOD in pkg.SOLVER.method_names
    assert importlib.import_module(f"optsolve.{kind}.methods").METHODS is pkg.METHODS  # each in its methods.py
    for name, method in pkg.METHODS.items():
        assert isinstance(method, Entry) and callable(method.run) and method.help, name  # one entry a method
        required = [p for p in inspect.signature(method.run).parameters.values() if p.default is p.empty]
        assert len(required) == 1, (name, required)  # one signature: called with the job alone
    source = inspect.getsource(pkg.solve_problem)
    assert "run(SOLVER," in source


class Threaded(Toy):
    """Records the BLAS threads its method and certificate see."""

    def copy(self, job):
        from threadpoolctl import threadpool_info

        self.seen = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] in ("blas", "openmp")]
        return super().copy(job)


def _blas_loaded():
    from threadpoolctl import threadpool_info

    if not any(lib["user_api"] == "blas" for lib in threadpool_info()):
        pytest.skip("no BLAS library reports its threads to threadpoolctl")


def test_a_solvers_thread_default_holds_inside_its_method():
    from threadpoolctl import threadpool_limits

    from optsolve.core import threads

    _blas_loaded()
    with threadpool_limits(limits=2):
        one = Threaded()
        one.blas_threads = 1
        result = run(one, {"value": 2.0}, scale=1.0)
        assert set(one.seen) == {1} and result.settings["threads"] == 1 and result.stats["threads"] == 1
        free = Threaded()  # no default: the libraries' own number
        result = run(free, {"value": 2.0}, scale=1.0)
        assert max(free.seen) == threads.in_effect() and result.settings["threads"] == "all"


def test_the_users_thread_count_wins_over_the_default():
    from threadpoolctl import threadpool_limits

    from optsolve.core import threads

    _blas_loaded()
    with threadpool_limits(limits=1):
        one = Threaded()
        one.blas_threads = 1
        with threads.requested("all"):
            result = run(one, {"value": 2.0}, scale=1.0)
        assert result.settings["threads"] == "all" and set(one.seen) == {1}  # the caller's limit of 1 left alone
        free = Threaded()
        with threads.requested(1):
            result = run(free, {"value": 2.0}, scale=1.0)
        assert set(free.seen) == {1} and result.settings["threads"] == 1
    with pytest.raises(ParameterError, match=r"'--threads' option must be an integer >= 0 \(0: all\) or 'all'; got 'x'"):
        threads.check("x")


def test_a_qp_solve_limits_numpys_threads_without_loading_scipy_linalg():
    """qp's methods use numpy's BLAS only: the limit holds there, and scipy.linalg (57 ms to import, a sixth of a
    small file's command) is not loaded for it."""
    import subprocess
    import sys

    code = ("import sys, numpy as np, optsolve.qp\n"
            "r = optsolve.qp.solve(np.eye(3), np.ones(3), np.eye(3), -np.ones(3), np.ones(3))\n"
            "print(r.status.value, r.stats['threads'], 'scipy.linalg' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    status, used, loaded = out.stdout.split()
    assert status == "optimal" and used in ("1", "None") and loaded == "False", out.stdout


@pytest.mark.parametrize("kind", KINDS)
def test_every_solver_declares_its_thread_default(kind):
    solver = importlib.import_module(f"optsolve.{kind}").SOLVER
    assert solver.blas_threads == 1


def test_threads_option_and_environment_are_recorded(cli, small_ot):
    small_ot, _ = small_ot
    assert cli("ot", small_ot).json()["settings"]["threads"] == 1
    doc = cli("ot", small_ot, "--threads", "2").json()
    assert doc["settings"]["threads"] == 2 and doc["stats"]["threads"] >= 1
    assert cli("ot", small_ot, env={"OPTSOLVE_THREADS": "all"}).json()["settings"]["threads"] == "all"
    r = cli("ot", small_ot, "--threads", "-1")
    assert r.exit_code == 7 and "'--threads'" in r.stderr


def test_a_deadline_keeps_its_finish_and_shares_what_is_left():
    class Clock:
        now = 100.0

        def __call__(self):
            return self.now

    tick = Clock()
    d = clock.Deadline.after(10.0, finish_passes=4, clock=tick)
    assert d.at == 110.0 and d.remaining() == 10.0
    d.measure(1.0, passes=2)  # 0.5 s a pass: 2 s kept for the finish
    assert d.at == 108.0 and d.remaining(extra_passes=2) == 7.0 and not d.expired()
    tick.now = 104.0
    half = d.share(0.5)
    assert half.at == 107.0 and half.start == 104.0  # half of the 6 s left before the end
    tick.now = 108.0
    assert d.expired() and not clock.Deadline.after(None).expired(1e9) and clock.Deadline().at is None
