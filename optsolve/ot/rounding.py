"""Rounding entropic potentials onto the transport polytope.

Altschuler, Weed and Rigollet (2017), Algorithm 2, in the log domain: potentials are
lowered where a marginal is exceeded (rows, then columns); the remaining deficit is the
rank-one term ``err_a err_b^T / |err_a|_1``. The rounded plan is exactly feasible and is
determined by the rounded potentials, so the certificate can recompute it.
"""

from __future__ import annotations

import numpy as np


def round_potentials(a, b, C, f, g, reg):
    """Altschuler's rounding in the log domain: lower f, then g, until no marginal is exceeded.

    Returns the new potentials, the rounded plan
    ``P = exp((f_i + g_j - C_ij)/reg) + err_a err_b^T / |err_a|_1`` and the L1 marginal error
    of the plan before rounding.
    """
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        K = np.exp((f[:, None] + g[None, :] - C) / reg)
        r = K.sum(1)
        before = float(np.abs(r - a).sum() + np.abs(K.sum(0) - b).sum())
        shift = np.where(r > a, reg * (np.log(a) - np.log(r)), 0.0)
        f = f + shift
        K *= np.exp(shift / reg)[:, None]
        c = K.sum(0)
        shift = np.where(c > b, reg * (np.log(b) - np.log(c)), 0.0)
        g = g + shift
        K *= np.exp(shift / reg)[None, :]
    err_a = a - K.sum(1)
    err_b = b - K.sum(0)
    s = err_a.sum()
    if s > 0:
        K += np.outer(err_a, err_b) / s
    return f, g, K, before
