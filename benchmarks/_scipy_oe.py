"""What users do today: output-error least squares with scipy (`solve_ivp` RK45 inside
`least_squares` LM), fitting the parameters and the initial state, for any right-hand
side written with NumPy. Shared by `wendy_vs_fsnls.py` and `output_error_vs_scipy.py`."""

import time
import warnings

import numpy as np
from _common import cpu_busy_seconds, other_cpu_load
from scipy.integrate import solve_ivp
from scipy.optimize import least_squares

FAIL_RESIDUAL = 1e6  # residual entry for samples a failed forward solve does not reach


def lorenz_rhs(t, u, sigma, rho, beta):
    """Lorenz as in `wendyjax.models.lorenz` (p = (σ, ρ, β)), for `solve_ivp`."""
    x, y, z = u
    return [sigma * (y - x), x * (rho - z) - y, x * y - beta * z]


def fitzhugh_nagumo_rhs(t, u, p1, p2, p3, p4, p5, p6):
    """FitzHugh–Nagumo as in `wendyjax.models.fitzhugh_nagumo`, for `solve_ivp`."""
    x, y = u
    return [p1 * x + p2 * x**3 + p3 * y, p4 * x + p5 + p6 * y]


class _RhsBudgetExceeded(Exception):
    pass


def make_residual(rhs, n_params, t, u_data, rtol, atol, max_rhs, counters):
    """Residual θ = (p, u0) ↦ u(t; p, u0) − data (flattened); a failed forward solve or
    one past `max_rhs` evaluations gives `FAIL_RESIDUAL` on the samples it misses."""
    t = np.asarray(t, float)
    u_data = np.asarray(u_data, float)
    span = (float(t[0]), float(t[-1]))

    def residual(theta):
        p, u0 = tuple(theta[:n_params]), theta[n_params:]
        counters["calls"] += 1
        n_rhs = 0

        def budgeted(t, u):
            nonlocal n_rhs
            n_rhs += 1
            if n_rhs > max_rhs:
                raise _RhsBudgetExceeded
            return rhs(t, u, *p)

        sim = np.full_like(u_data, FAIL_RESIDUAL)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # overflow in a diverging solve
                sol = solve_ivp(budgeted, span, u0, method="RK45", t_eval=t, rtol=rtol, atol=atol)
        except _RhsBudgetExceeded:
            counters["ivp_budget_stops"] += 1
            sol = None
        n = 0 if sol is None or sol.y.ndim != 2 else sol.y.shape[1]
        if sol is not None and (sol.status < 0 or n < len(t)):
            counters["ivp_failures"] += 1
        if n:
            sim[:n] = sol.y.T[:n]
        r = sim - u_data
        bad = ~np.isfinite(r)
        if bad.any():
            counters["nonfinite"] += 1
            r[bad] = FAIL_RESIDUAL
        return r.ravel()

    return residual


def rel_err(p, p_true) -> float:
    p, p_true = np.asarray(p, float), np.asarray(p_true, float)
    return float(np.linalg.norm(p - p_true) / np.linalg.norm(p_true))


def fit_scipy(rhs, data, p0, p_true, rtol, atol, max_nfev, max_rhs):
    """One scipy LM fit of (p, u0) from `p0` and the first data row; timed."""
    n_params = len(p0)
    counters = {"calls": 0, "ivp_failures": 0, "ivp_budget_stops": 0, "nonfinite": 0}
    residual = make_residual(rhs, n_params, data.t, data.u, rtol, atol, max_rhs, counters)
    theta0 = np.concatenate([np.asarray(p0, float), np.asarray(data.u, float)[0]])
    cpu0, t0 = cpu_busy_seconds(), time.perf_counter()
    res = least_squares(residual, theta0, method="lm", max_nfev=max_nfev)
    wall = time.perf_counter() - t0
    other = other_cpu_load(cpu0, cpu_busy_seconds(), wall)
    p_hat = res.x[:n_params]
    return {
        "params": p_hat.tolist(),
        "u0": res.x[n_params:].tolist(),
        "rel_err": rel_err(p_hat, p_true),
        "time_s": wall,
        "nfev": int(res.nfev),
        "forward_solves": counters["calls"],
        "ivp_failures": counters["ivp_failures"],
        "ivp_budget_stops": counters["ivp_budget_stops"],
        "nonfinite_residuals": counters["nonfinite"],
        "status": int(res.status),
        "message": res.message,
        "hit_cap": bool(res.status == 0),
        "converged": bool(res.status > 0),
        "cost": float(res.cost),
        "other_processes_cores": other,
    }
