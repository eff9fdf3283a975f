"""Logistic regression to fractional targets, weighted: the fit under the confidence tables
(:mod:`training.compact.fit_confidence`, :mod:`training.compact.recalibrate`).
"""

from __future__ import annotations

import numpy as np

RIDGE = 1e-5  # on the weights but the intercept, relative to the total weight (keeps IRLS stable)


def fit_logistic(x: np.ndarray, y: np.ndarray, w: np.ndarray, iters: int = 200) -> np.ndarray:
    """Weights ``b`` [F] of ``sigmoid(x @ b)`` fitted to fractional targets ``y`` [N] in [0, 1] with
    sample weights ``w`` [N] (binomial log-likelihood, Newton / IRLS, ridge :data:`RIDGE` x sum(w) on
    all but the first column). ``x`` [N, F] float64.
    """
    b = np.zeros(x.shape[1])
    b[0] = np.log(max(1e-4, np.average(y, weights=w)) / max(1e-4, 1 - np.average(y, weights=w)))
    reg = RIDGE * w.sum() * np.eye(x.shape[1])
    reg[0, 0] = 1e-9 * w.sum()  # the intercept nearly free; keeps the Hessian invertible when p saturates
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-np.clip(x @ b, -40, 40)))
        grad = x.T @ (w * (p - y)) + reg @ b
        hess = (x * (w * p * (1 - p))[:, None]).T @ x + reg
        step = np.linalg.solve(hess, grad)
        step *= min(1.0, 2.0 / max(1e-12, float(np.abs(step).max())))  # damped: no weight moves by more than 2
        b -= step
        if np.abs(step).max() < 1e-8:
            break
    return b
