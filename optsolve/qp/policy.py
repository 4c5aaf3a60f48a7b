"""Learned feedback policies for OSQP's ADMM (DeepQP) and their PAC-Bayes certificates.

Saravanos et al. (2025) unroll the ADMM iterations and learn feedback policies that map the
residuals to the algorithm's parameters. Here (our design where the paper is silent): a
small MLP, shared across steps, is called every ``interval`` iterations for the first
``steps`` calls; its inputs are log10 of the relative primal and dual residuals (OSQP's
normalisation), of their ratio and of rho, the step's position k/K and alpha - 1; its two
outputs move rho by a factor up to 10 either way and set alpha in (0.05, 1.95). After those
K learned steps OSQP's adaptive rule takes over, so convergence is OSQP's. A policy also
carries the parameters it starts from (``start``: rho, and mu), fitted with it. For
DeepDistributedQP the same MLP, shared by all nodes, maps a node's relative primal and
consensus residuals, the global dual residual, k/K and its log10 rho and mu to its new rho
and mu; after K steps the parameters stay fixed, where the relaxed ADMM converges.

A per-row policy (``kind`` ``"rows"``, ours) sets one rho per inequality row of the centralised
ADMM instead of one for all: the same MLP, shared by the rows, maps a row's own features (how
far its z is from the nearer bound, the size of its dual, its primal residual, k/K) to the
row's rho as a factor between 1/100 and 100 of the starting rho (equality and free rows keep
OSQP's rho; alpha stays OSQP's 1.6). A row whose bound is active wants a large rho (its
constraint is nearly an equality), an inactive one a small rho (its dual is zero and its z
should move freely); OSQP itself separates only equality rows (rho x 1e3). The factors stay
after the K steps, and OSQP's adaptive rule then moves the rows' common level.

Training uses evolution strategies (antithetic Gaussian perturbations of the weights, Salimans
et al. 2017) on the loss ``min(iterations to tolerance, cap) / cap`` in [0, 1]: no gradients
through the solver, numpy only. The search distribution N(m, s^2 I) is the PAC-Bayes posterior.

PAC-Bayes (Maurer 2004; Perez-Ortiz et al. 2021 for the sampled empirical loss): with the
prior P0 = N(theta0, s0^2 I) fixed before the N certification problems are drawn, with
probability at least 1 - delta - delta', ``E l <= kl^-1(L_up, (KL(Q||P0) + ln(2 sqrt(N)/delta)) / N)``
where ``L_up = kl^-1(L_hat, ln(2/delta') / (N L))`` bounds the expected empirical loss from
``L`` posterior samples per problem. The prior is data-dependent: trained on a separate split
of problems, then used as the posterior, so KL = 0.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

POLICY_DIR = Path(__file__).resolve().parent / "policies"  # shipped with the package (data/qp/policies links here)


def default_policy_path(qp=None, kind: str = "centralised") -> str | None:
    """The shipped policy for ``qp``'s family (its ``family`` field), else the general one: the random-QP
    policy (centralised), the chain policy (distributed); None when no such file is shipped."""
    suffix = "" if kind == "centralised" else "-distributed"
    family = qp.family if qp is not None else None
    if family and (POLICY_DIR / f"{family}{suffix}.npz").exists():
        return str(POLICY_DIR / f"{family}{suffix}.npz")
    path = POLICY_DIR / ("random.npz" if kind == "centralised" else "chain-distributed.npz")
    return str(path) if path.exists() else None


FEATURES = 6
OUTPUTS = 2
ROW_FEATURES = 4  # per-row policies: distance to the nearer bound, |y|, primal residual, k/K
ROW_SPAN = 2.0  # a row's rho is the starting rho times 10^(-ROW_SPAN .. ROW_SPAN)
KINDS = ("centralised", "distributed", "rows")
LOG_RES_CLIP = 12.0
ALPHA_SPAN = 0.95
ALPHA_START = 1.6


def shape_of(kind: str) -> tuple[int, int]:
    """(features, outputs) of a policy of ``kind``."""
    return (ROW_FEATURES, 1) if kind == "rows" else (FEATURES, OUTPUTS)


def n_params(hidden: int, kind: str = "centralised") -> int:
    features, outputs = shape_of(kind)
    return hidden * features + hidden + outputs * hidden + outputs


def initial_weights(hidden: int, rng=None, scale: float = 0.1, kind: str = "centralised") -> np.ndarray:
    """Small random first layer, zero output layer: the parameters unchanged at the start (alpha = 1.6; every
    row's rho the starting one)."""
    rng = rng or np.random.default_rng(0)
    features, _ = shape_of(kind)
    theta = np.zeros(n_params(hidden, kind))
    theta[: hidden * features] = rng.standard_normal(hidden * features) * scale
    if kind == "centralised":
        theta[-1] = math.atanh((ALPHA_START - 1.0) / ALPHA_SPAN)
    return theta


@dataclass
class Policy:
    """An MLP parameter policy: ``policy(k, prim_rel, dual_rel, rho, alpha) -> (rho, alpha)``.

    ``kind`` ``"distributed"`` (DeepDistributedQP): one MLP shared by all nodes,
    ``policy.nodes(k, prim_rel, cons_rel, dual_rel, rho, mu) -> (rho, mu)`` from each node's own
    relative primal and consensus residuals and the global dual residual. ``kind`` ``"rows"``:
    ``policy.rows(k, l, u, z, y, Ax) -> factors`` of every row's rho.
    """

    theta: np.ndarray
    hidden: int = 8
    steps: int = 10  # K: learned calls
    interval: int = 5  # iterations between calls
    header: dict = field(default_factory=dict)
    kind: str = "centralised"
    start: dict = field(default_factory=dict)  # starting parameters: {"rho": ..} (and "mu" for distributed)

    def __post_init__(self):
        self.theta = np.asarray(self.theta, dtype=float)
        if self.kind not in KINDS:
            raise ValueError(f"policy kind {self.kind!r}, expected one of {', '.join(KINDS)}")
        size = n_params(self.hidden, self.kind)
        if self.theta.shape != (size,):
            raise ValueError(f"policy weights have {self.theta.size} entries, expected {size} "
                             f"for {self.hidden} hidden units")
        h, (f, o) = self.hidden, shape_of(self.kind)
        t = self.theta
        self.W1 = t[: h * f].reshape(h, f)
        self.b1 = t[h * f: h * f + h]
        self.W2 = t[h * f + h: h * f + h + o * h].reshape(o, h)
        self.b2 = t[h * f + h + o * h:]

    def _forward(self, feats):
        """Outputs for features ``feats`` (FEATURES,) or (FEATURES, N): one column per node."""
        b1, b2 = (self.b1, self.b2) if feats.ndim == 1 else (self.b1[:, None], self.b2[:, None])
        return np.tanh(self.W2 @ np.tanh(self.W1 @ feats + b1) + b2)

    def nodes(self, k: int, prim_rel, cons_rel, dual_rel: float, rho, mu):
        """DeepDistributedQP: every node's new (rho, mu), each moved by a factor up to 10 either way, from
        the arrays of the nodes' own relative primal and consensus residuals and the global dual one."""
        prim_rel, cons_rel = np.asarray(prim_rel, dtype=float), np.asarray(cons_rel, dtype=float)
        rho, mu = np.asarray(rho, dtype=float), np.asarray(mu, dtype=float)

        def lg(v):
            return np.clip(np.log10(v + 1e-300), -LOG_RES_CLIP, 4.0) / 4.0

        feats = np.vstack([lg(prim_rel), lg(cons_rel), np.full(prim_rel.shape, lg(float(dual_rel))),
                           np.full(prim_rel.shape, k / max(self.steps, 1)), np.log10(rho) / 3.0, np.log10(mu) / 3.0])
        out = self._forward(feats)
        return np.clip(rho * 10.0 ** out[0], 1e-6, 1e6), np.clip(mu * 10.0 ** out[1], 1e-6, 1e6)

    def rows(self, k: int, l, u, z, y, Ax) -> np.ndarray:
        """Per-row policy: the factor (1/100 to 100) of every row's rho, from the (scaled) bounds ``l``, ``u``, the
        iterate's ``z``, ``y`` and ``Ax`` (the solver applies it to inequality rows only:
        :func:`optsolve.qp.admm.rho_vector`)."""
        def lg(v):
            return np.clip(np.log10(v + 1e-300), -LOG_RES_CLIP, 4.0) / 4.0

        gap = np.minimum(np.where(np.isfinite(l), z - l, np.inf), np.where(np.isfinite(u), u - z, np.inf))
        size = 1.0 + np.abs(z)
        y_top = float(np.abs(y).max()) if y.size else 0.0
        feats = np.vstack([lg(np.maximum(gap, 0.0) / size), lg(np.abs(y) / (y_top + 1e-300)),
                           lg(np.abs(Ax - z) / size), np.full(z.shape, k / max(self.steps, 1))])
        return 10.0 ** (ROW_SPAN * self._forward(feats)[0])

    def __call__(self, k: int, prim_rel: float, dual_rel: float, rho: float, alpha: float):
        lp = float(np.clip(math.log10(prim_rel + 1e-300), -LOG_RES_CLIP, 4.0))
        ld = float(np.clip(math.log10(dual_rel + 1e-300), -LOG_RES_CLIP, 4.0))
        feats = np.array([lp / 4.0, ld / 4.0, (lp - ld) / 4.0, k / max(self.steps, 1), math.log10(rho) / 3.0,
                          alpha - 1.0])
        out = self._forward(feats)
        new_rho = float(np.clip(rho * 10.0 ** out[0], 1e-6, 1e6))
        return new_rho, 1.0 + ALPHA_SPAN * float(out[1])

    def save(self, path: str) -> None:
        """An .npz file: the weights ``theta`` and a JSON ``header`` (training record, PAC-Bayes bound)."""
        from optsolve.core.result import write_atomic_with

        header = dict(self.header, hidden=self.hidden, steps=self.steps, interval=self.interval, kind=self.kind,
                      start=self.start, format="optsolve.qp-policy/1")
        write_atomic_with(path, lambda f: np.savez(f, theta=self.theta, header=np.array(json.dumps(header))))

    @classmethod
    def load(cls, path: str) -> "Policy":
        from optsolve.core.errors import InputError, ParameterError
        from optsolve.core.files import read_raw

        try:  # read as a problem file is: its arrays' declared sizes within the memory budget first
            raw, _ = read_raw(path)
            header = raw["header"]
            header = json.loads(header if isinstance(header, str) else str(np.asarray(header)))
            theta = np.asarray(raw["theta"], dtype=float)
        except InputError as exc:
            raise ParameterError(f"Policy file {path!r} is not readable ({exc})") from None
        except (OSError, KeyError, ValueError, TypeError) as exc:
            raise ParameterError(f"Policy file {path!r} is not readable ({type(exc).__name__}: {exc}).") from None
        if not isinstance(header, dict):
            raise ParameterError(f"Policy file {path!r}: its 'header' is not a JSON object.")
        if header.get("format") != "optsolve.qp-policy/1":
            raise ParameterError(f"Policy file {path!r} has format {header.get('format')!r}; expected "
                                 "'optsolve.qp-policy/1'.")
        try:
            for key, least in (("hidden", 1), ("steps", 0), ("interval", 1)):
                value = header[key]
                if isinstance(value, bool) or not isinstance(value, int) or value < least:
                    raise ValueError(f"header {key!r} is {value!r}, expected an integer >= {least}")
            if theta.ndim != 1 or not np.all(np.isfinite(theta)):
                raise ValueError(f"weights 'theta' of shape {theta.shape} must be a vector of finite numbers")
            start = {str(k): float(v) for k, v in (header.get("start") or {}).items()}
            if any(not (1e-6 <= v <= 1e6) for v in start.values()):
                raise ValueError(f"starting parameters {start} outside [1e-6, 1e6]")
            return cls(theta, int(header["hidden"]), int(header["steps"]), int(header["interval"]), header,
                       header.get("kind", "centralised"), start)
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            raise ParameterError(f"Policy file {path!r} is malformed ({exc}).") from None


# --------------------------------------------------------------------------- PAC-Bayes

def kl_bernoulli(q: float, p: float) -> float:
    """kl(q || p) between Bernoulli distributions."""
    q, p = min(max(q, 0.0), 1.0), min(max(p, 1e-300), 1.0 - 1e-16)
    out = 0.0
    if q > 0:
        out += q * math.log(q / p)
    if q < 1:
        out += (1 - q) * math.log((1 - q) / (1 - p))
    return out


def kl_inverse(q: float, c: float) -> float:
    """The largest p in [q, 1] with kl(q || p) <= c (bisection)."""
    if c <= 0:
        return q
    lo, hi = q, 1.0
    if kl_bernoulli(q, hi) <= c:
        return 1.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if kl_bernoulli(q, mid) > c:
            hi = mid
        else:
            lo = mid
    return hi


def gaussian_kl(m, s, m0, s0) -> float:
    """KL(N(m, s^2 I) || N(m0, s0^2 I))."""
    m, m0 = np.asarray(m, dtype=float), np.asarray(m0, dtype=float)
    d = m.size
    r = (s / s0) ** 2
    return float(0.5 * (d * r + float(((m - m0) ** 2).sum()) / s0 ** 2 - d - d * math.log(r)))


def pac_bayes_bound(losses, kl: float, delta: float, delta_prime: float) -> dict:
    """The certificate for an N x L array of losses in [0, 1] (L posterior samples per problem)."""
    losses = np.asarray(losses, dtype=float)
    n, l_samples = losses.shape
    l_hat = float(losses.mean())
    l_up = kl_inverse(l_hat, math.log(2.0 / delta_prime) / (n * l_samples))
    bound = kl_inverse(l_up, (kl + math.log(2.0 * math.sqrt(n) / delta)) / n)
    return {"N": n, "L": l_samples, "delta": delta, "delta_prime": delta_prime, "KL": kl,
            "empirical_loss": l_hat, "empirical_loss_bound": l_up, "bound": bound}
