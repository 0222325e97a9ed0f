"""What users do today: output-error least squares with scipy (`solve_ivp` RK45 inside `least_squares` LM),
fitting the parameters and the initial state of a NumPy right-hand side. Used by `wendy_vs_fsnls.py` and
`output_error_vs_scipy.py`."""

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


def rel_err(p, p_true) -> float:
    p, p_true = np.asarray(p, float), np.asarray(p_true, float)
    return float(np.linalg.norm(p - p_true) / np.linalg.norm(p_true))


def fit_scipy(rhs, data, p0, p_true, rtol, atol, max_nfev, max_rhs):
    """One timed LM fit of θ = (p, u0) from `p0` and the first data row. The residual is u(t; θ) − data; a
    forward solve that fails or passes `max_rhs` rhs calls gives `FAIL_RESIDUAL` on the samples it misses."""
    t, u_data, n_params = np.asarray(data.t, float), np.asarray(data.u, float), len(p0)
    counts = {"forward_solves": 0, "ivp_failures": 0, "ivp_budget_stops": 0}

    def residual(theta):
        counts["forward_solves"] += 1
        n_rhs = 0

        def budgeted(t, u):
            nonlocal n_rhs
            n_rhs += 1
            if n_rhs > max_rhs:
                raise _RhsBudgetExceeded
            return rhs(t, u, *theta[:n_params])

        sim = np.full_like(u_data, FAIL_RESIDUAL)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # overflow in a diverging solve
                sol = solve_ivp(
                    budgeted, (t[0], t[-1]), theta[n_params:], method="RK45", t_eval=t, rtol=rtol, atol=atol
                )
            n = sol.y.shape[1] if sol.y.ndim == 2 else 0
            counts["ivp_failures"] += sol.status < 0 or n < len(t)
            sim[:n] = sol.y.T[:n]
        except _RhsBudgetExceeded:
            counts["ivp_budget_stops"] += 1
        r = sim - u_data
        r[~np.isfinite(r)] = FAIL_RESIDUAL
        return r.ravel()

    cpu0, t0 = cpu_busy_seconds(), time.perf_counter()
    res = least_squares(residual, np.concatenate([np.asarray(p0, float), u_data[0]]), method="lm", max_nfev=max_nfev)
    wall = time.perf_counter() - t0
    return {
        "params": res.x[:n_params].tolist(),
        "u0": res.x[n_params:].tolist(),
        "rel_err": rel_err(res.x[:n_params], p_true),
        "time_s": wall,
        "nfev": int(res.nfev),
        **counts,
        "status": int(res.status),
        "message": res.message,
        "hit_cap": bool(res.status == 0),
        "converged": bool(res.status > 0),
        "cost": float(res.cost),
        "other_processes_cores": other_cpu_load(cpu0, cpu_busy_seconds(), wall),
    }
