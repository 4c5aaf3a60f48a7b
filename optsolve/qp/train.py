"""Training DeepQP policies (``optsolve qp-train``): evolution strategies, baselines, PAC-Bayes.

The problems are split three ways before anything is fitted: a training split (the policy's
starting rho, and mu, are chosen there from a grid, then the policy's mean is fitted by
antithetic evolution strategies; the constant-rho baseline is tuned there too), a held-out
split (losses reported, nothing fitted), and a certification split (the PAC-Bayes bound,
computed with the trained policy as a data-dependent prior that is also the posterior: see
:mod:`optsolve.qp.policy`).
"""

from __future__ import annotations

import time

import numpy as np

from optsolve.core.progress import get_logger
from optsolve.qp.admm import ADMMSettings, solve_admm
from optsolve.qp.policy import Policy, initial_weights, pac_bayes_bound
from optsolve.qp.scaling import ruiz_scale

LOSS = "min(iterations to eps_abs = eps_rel = eps, cap) / cap; a run that misses the tolerance by cap scores 1"


class Batch:
    """Problems with their scaling computed once; ``nodes``: solved by DistributedQP (the file's
    partition where there is one, else that many nodes), else by centralised ADMM."""

    def __init__(self, problems, scaling: int = 10, nodes: int | None = None):
        self.problems = list(problems)
        self.scaled = [ruiz_scale(qp, scaling) for qp in self.problems]
        self.nodes = nodes

    def __len__(self):
        return len(self.problems)

    def run(self, eps: float, cap: int, check_every: int, controller=None, idx=None, rho: float | None = None,
            adaptive: bool = True, mu: float | None = None) -> np.ndarray:
        """Iterations to tolerance of each problem (cap + 1 when it is not reached)."""
        from optsolve.qp.distributed import solve_distributed

        idx = range(len(self)) if idx is None else idx
        out = []
        for i in idx:
            qp = self.problems[i]
            if self.nodes is not None:
                part = qp.partition
                r = solve_distributed(qp, None if part is not None else self.nodes, part, rho=rho or 1.0,
                                      mu=mu or rho or 1.0, eps_abs=eps, eps_rel=eps, max_iter=cap,
                                      check_every=check_every,
                                      refine_stalled=False, controller=controller, scaled=self.scaled[i])
            else:
                r = solve_admm(qp, _settings(eps, cap, check_every, rho or 0.1, adaptive), controller=controller,
                               scaled=self.scaled[i])
            out.append(r.iterations if r.status == "optimal" else cap + 1)
        return np.array(out, dtype=float)


def _settings(eps, cap, check_every, rho=0.1, adaptive=True):
    return ADMMSettings(eps_abs=eps, eps_rel=eps, max_iter=cap, check_every=check_every, rho=rho,
                        adaptive_rho=adaptive, refine_stalled=False)


def losses_of(batch: Batch, theta, policy_shape: dict, eps: float, cap: int, idx=None) -> np.ndarray:
    policy = Policy(theta, **policy_shape)
    return _losses(batch, policy, eps, cap, idx)


def _losses(batch: Batch, policy: Policy, eps: float, cap: int, idx=None) -> np.ndarray:
    its = batch.run(eps, cap, policy.interval, controller=policy, idx=idx)
    return np.minimum(its, cap) / cap


START_GRID = 10.0 ** np.arange(-2.0, 1.01, 0.5)


def tune_start(batch: Batch, shape: dict, eps: float, cap: int, minibatch: int, rng) -> tuple[dict, float]:
    """The policy's starting parameters: the best of a grid for the policy whose output layer is
    zero (it keeps them), on a subset of the training split. Centralised: rho; distributed: rho
    and mu, by coordinate search (mu, then rho, then mu again)."""
    idx = rng.choice(len(batch), size=min(max(minibatch, 16), len(batch)), replace=False)
    theta = initial_weights(shape["hidden"], np.random.default_rng(0), kind=shape["kind"])
    scores = {}

    def score(start):
        key = tuple(sorted(start.items()))
        if key not in scores:
            scores[key] = float(_losses(batch, Policy(theta, **shape, start=dict(start)), eps, cap, idx).mean())
        return scores[key]

    if shape["kind"] != "distributed":
        start = min(({"rho": float(r)} for r in START_GRID), key=score)
    else:
        start = {"rho": 1.0, "mu": 1.0}
        for name in ("mu", "rho", "mu"):
            start = min((dict(start, **{name: float(v)}) for v in START_GRID), key=score)
    return start, score(start)


def train_es(batch: Batch, *, hidden: int, steps: int, interval: int, eps: float, cap: int, generations: int,
             population: int, sigma: float, lr: float, minibatch: int, seed: int, kind: str = "centralised",
             start: dict | None = None):
    """Antithetic evolution strategies with rank-shaped fitness and Adam on the mean; returns (theta, history)."""
    rng = np.random.default_rng(seed)
    shape = {"hidden": hidden, "steps": steps, "interval": interval, "kind": kind, "start": dict(start or {})}
    theta = initial_weights(hidden, rng, kind=kind)
    m1, m2 = np.zeros_like(theta), np.zeros_like(theta)
    b1, b2 = 0.9, 0.999
    history = []
    log = get_logger()
    best, best_loss = theta.copy(), float(losses_of(batch, theta, shape, eps, cap).mean())
    for g in range(1, generations + 1):
        idx = rng.choice(len(batch), size=min(minibatch, len(batch)), replace=False)
        noise = rng.standard_normal((population, theta.size))
        plus = np.array([losses_of(batch, theta + sigma * e, shape, eps, cap, idx).mean() for e in noise])
        minus = np.array([losses_of(batch, theta - sigma * e, shape, eps, cap, idx).mean() for e in noise])
        ranks = np.argsort(np.argsort(np.concatenate([plus, minus]))).astype(float)
        ranks = ranks / (ranks.size - 1) - 0.5
        grad = ((ranks[:population] - ranks[population:])[:, None] * noise).sum(0) / (2 * population * sigma)
        m1 = b1 * m1 + (1 - b1) * grad
        m2 = b2 * m2 + (1 - b2) * grad * grad
        theta = theta - lr * (m1 / (1 - b1 ** g)) / (np.sqrt(m2 / (1 - b2 ** g)) + 1e-8)
        if g % 5 == 0 or g == generations:
            full = float(losses_of(batch, theta, shape, eps, cap).mean())
            history.append({"generation": g, "train_loss": full})
            log.info(f"qp-train: generation {g}: training loss {full:.4f} (best {min(best_loss, full):.4f})")
            if full < best_loss:
                best, best_loss = theta.copy(), full
    return best, history


def tune_constant_rho(batch: Batch, eps: float, cap: int, check_every: int, adaptive: bool):
    grid = 10.0 ** np.arange(-3.0, 2.01, 0.5)
    scores = [float(np.minimum(batch.run(eps, cap, check_every, rho=rho, adaptive=adaptive), cap).mean())
              for rho in grid]
    k = int(np.argmin(scores))
    return float(grid[k]), scores[k]


def train_policy(problems, *, family: str, hidden: int = 8, steps: int = 10, interval: int = 5, eps: float = 1e-3,
                 cap: int = 500, generations: int = 30, population: int = 8, sigma: float = 0.05, lr: float = 0.05,
                 minibatch: int = 16, split=(0.3, 0.2), samples: int = 2, delta: float = 0.01,
                 delta_prime: float = 0.01, seed: int = 0, nodes: int | None = None, rows: bool = False) -> Policy:
    """Train, evaluate and certify a policy on ``problems`` (QPProblem list); the header records it all.

    ``nodes``: a DeepDistributedQP policy (for DistributedQP over that many nodes, or each problem's
    own partition), compared with the untrained method and with centralised OSQP. ``rows``: a per-row
    policy (one rho per inequality row, :meth:`optsolve.qp.policy.Policy.rows`) for centralised ADMM.
    """
    if nodes is not None and rows:
        raise ValueError("a per-row policy is for the centralised ADMM: nodes must be None")
    kind = "distributed" if nodes is not None else "rows" if rows else "centralised"
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(problems))
    n_train = max(2, int(round(split[0] * len(problems))))
    n_held = max(1, int(round(split[1] * len(problems))))
    train = Batch([problems[i] for i in order[:n_train]], nodes=nodes)
    held = Batch([problems[i] for i in order[n_train:n_train + n_held]], nodes=nodes)
    cert = Batch([problems[i] for i in order[n_train + n_held:]], nodes=nodes)
    if len(cert) < 1:
        raise ValueError("too few problems for a certification split")
    shape = {"hidden": hidden, "steps": steps, "interval": interval, "kind": kind}
    start, start_loss = tune_start(train, shape, eps, cap, minibatch, rng)
    get_logger().info(f"qp-train: starting parameters {start} (training subset loss {start_loss:.4f})")
    theta, history = train_es(train, eps=eps, cap=cap, generations=generations, population=population,
                              sigma=sigma, lr=lr, minibatch=minibatch, seed=seed, start=start, **shape)
    shape["start"] = start

    def mean_its(batch, check_every, controller=None, rho=None, adaptive=True, mu=None):
        return float(np.minimum(batch.run(eps, cap, check_every, controller, rho=rho, adaptive=adaptive, mu=mu),
                                cap).mean())

    policy = Policy(theta, **shape)
    rho_const, _ = tune_constant_rho(train, eps, cap, interval, adaptive=False)
    central = Batch(held.problems)  # centralised OSQP on the same held-out problems
    baselines = {
        "osqp_defaults": mean_its(central, 25),
        "osqp_check_every_interval": mean_its(central, interval),
        "tuned_constant_rho": {"rho": rho_const, "iterations": mean_its(held, interval, rho=rho_const,
                                                                         adaptive=False)},
        "policy": mean_its(held, interval, policy),
    }
    if nodes is None:
        rho_start, _ = tune_constant_rho(train, eps, cap, interval, adaptive=True)
        baselines["tuned_initial_rho_adaptive"] = {"rho": rho_start,
                                                   "iterations": mean_its(held, interval, rho=rho_start)}
    else:
        baselines["distributed_untrained"] = mean_its(held, interval)
        baselines["tuned_constant_rho_mu"] = {**start, "iterations": mean_its(held, interval, rho=start["rho"],
                                                                              mu=start["mu"])}
    samples_losses = np.empty((len(cert), samples))
    for j in range(samples):
        noise_rng = np.random.default_rng(seed + 1000 + j)
        for i in range(len(cert)):  # a fresh posterior sample per problem and per draw
            draw = theta + sigma * noise_rng.standard_normal(theta.size)
            samples_losses[i, j] = losses_of(cert, draw, shape, eps, cap, idx=[i])[0]
    bound = pac_bayes_bound(samples_losses, kl=0.0, delta=delta, delta_prime=delta_prime)
    bound.update(loss=LOSS, cap=cap, eps=eps, prior="N(theta_trained, sigma^2 I), fitted on the training split "
                 "before the certification split was used", posterior="the prior itself (KL = 0)", sigma=sigma)
    policy.header = {
        "family": family, "kind": kind, "nodes": nodes, "K": steps, "interval": interval, "eps": eps, "cap": cap,
        "problems": {"train": len(train), "held_out": len(held), "certification": len(cert)},
        "training_loss": float(losses_of(train, theta, shape, eps, cap).mean()),
        "held_out_loss": float(losses_of(held, theta, shape, eps, cap).mean()),
        "held_out_iterations": baselines, "pac_bayes": bound, "history": history,
        "training": {"generations": generations, "population": population, "sigma": sigma, "lr": lr,
                     "minibatch": minibatch, "seed": seed, "time_s": time.perf_counter() - t0},
    }
    return policy
