"""The simulation study of Carey & Ramsay 2021 §5 (Tables 1–3): Data2LD and competitors on model (14).

    python benchmarks/data2ld_simulation.py          # 1000 replicates per cell, every method (~45 min)

Data2LD (orders 5 and 6), parameter cascading, NLS, SA and SFT (`_data2ld_competitors.py`) on the same replicates,
each in one compiled call: 100·RMSE(θ̂), 95 % coverage, 100·RMSE(x̂), failures and seconds beside Tables 1–3.
"""

import datetime
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats
from _common import machine_info, markdown_table, paragraphs, parser, provenance, write_results
from _data2ld_competitors import pulse_response, simulated_annealing, smooth_functional_tempering

import wendyjax as wj
from wendyjax import RESULTS, datasets as ds, linear as L
from wendyjax.estimators import output_error_problem, stack_problems

TRUTH = np.array(ds.SIMULATION_THETA)
NS, SIGMAS = (21, 51, 101), (0.10, 0.05, 0.01)
METHODS = ("Data2LD", "Data2LD order 6", "PC", "NLS", "SA", "SFT")
SFT_LAMBDAS = (10.0, 1e2, 1e3, 1e4)  # Carey & Ramsay 2021 §5: four chains
# Carey & Ramsay 2021 Tables 1–2: {σ: {method: [β₀ for N = 21, 51, 101, β₁ ×3, α ×3]}}; Table 3: x̂ per σ, N
PAPER_RMSE = {
    0.10: {
        "Data2LD": [0.25, 0.17, 0.11, 1.79, 1.19, 0.12, 4.12, 2.37, 1.69],
        "NLS": [0.61, 0.30, 0.23, 4.63, 2.05, 1.86, 13.19, 4.05, 4.71],
        "PC": [0.27, 0.23, 0.21, 2.57, 2.06, 1.70, 27.34, 27.31, 27.16],
        "SA": [1.95, 0.22, 0.16, 6.38, 1.76, 1.28, 32.49, 3.74, 1.95],
        "SFT": [0.26, 0.18, 0.13, 2.46, 1.88, 0.75, 39.42, 36.84, 34.91],
    },
    0.05: {
        "Data2LD": [0.11, 0.07, 0.06, 0.86, 0.62, 0.40, 1.84, 1.02, 0.96],
        "NLS": [0.28, 0.14, 0.09, 2.52, 0.85, 0.58, 5.94, 2.22, 1.85],
        "PC": [0.36, 0.23, 0.22, 10.39, 1.97, 1.81, 27.32, 27.11, 23.19],
        "SA": [0.40, 0.14, 0.07, 3.75, 1.01, 0.49, 25.44, 1.89, 0.93],
        "SFT": [0.20, 0.11, 0.06, 1.12, 0.81, 0.68, 45.07, 39.45, 37.38],
    },
    0.01: {
        "Data2LD": [0.03, 0.02, 0.01, 0.18, 0.10, 0.08, 0.03, 0.02, 0.01],
        "NLS": [0.07, 0.02, 0.02, 0.44, 0.12, 0.13, 1.33, 0.31, 0.56],
        "PC": [22.84, 0.90, 0.46, 25.84, 3.56, 3.31, 26.15, 19.56, 17.02],
        "SA": [17.34, 0.02, 0.01, 6.41, 0.18, 0.15, 4.53, 0.38, 0.31],
        "SFT": [0.04, 0.04, 0.03, 0.34, 0.23, 0.23, 39.61, 39.24, 38.48],
    },
}
PAPER_COVERAGE = {
    0.10: {
        "Data2LD": [88, 90, 92, 86, 89, 91, 87, 86, 87],
        "NLS": [82, 86, 71, 78, 78, 64, 53, 61, 55],
        "PC": [55, 61, 61, 41, 52, 57, 0, 0, 0],
        "SA": [79, 99, 100, 39, 78, 85, 25, 68, 80],
        "SFT": [100] * 9,
    },
    0.05: {
        "Data2LD": [82, 91, 92, 81, 91, 85, 86, 89, 86],
        "NLS": [78, 74, 74, 69, 72, 68, 51, 57, 56],
        "PC": [76, 51, 38, 30, 24, 17, 0, 0, 3],
        "SA": [76, 93, 99, 38, 68, 77, 15, 55, 64],
        "SFT": [100] * 9,
    },
    0.01: {
        "Data2LD": [82, 82, 91, 85, 90, 90, 89, 84, 94],
        "NLS": [79, 75, 59, 78, 80, 79, 54, 61, 53],
        "PC": [0, 21, 91, 0, 13, 76, 0, 8, 9],
        "SA": [66, 94, 98, 19, 44, 72, 8, 34, 43],
        "SFT": [100] * 9,
    },
}
PAPER_X = {
    "Data2LD": {0.10: [3.36, 2.30, 1.60], 0.05: [1.82, 1.14, 0.85], 0.01: [0.32, 0.26, 0.20]},
    "NLS": {0.10: [5.28, 2.88, 2.27], 0.05: [3.19, 1.36, 1.18], 0.01: [0.75, 0.29, 0.29]},
    "PC": {0.10: [4.41, 3.11, 2.76], 0.05: [3.85, 2.55, 2.39], 0.01: [1.17, 0.76, 0.34]},
    "SA": {0.10: [9.41, 2.91, 1.96], 0.05: [4.83, 1.67, 1.06], 0.01: [5.43, 0.33, 0.24]},
    "SFT": {0.10: [7.67, 5.33, 2.94], 0.05: [3.81, 2.22, 1.56], 0.01: [0.65, 0.45, 0.30]},
}


def metrics(theta, lower, upper, xhat, x, ok):
    """100·RMSE(θ̂), coverage %, 100·RMSE(x̂) over the replicates that did not fail."""
    theta, lower, upper, xhat = theta[ok], lower[ok], upper[ok], xhat[ok]
    out = {"rmse_theta_x100": (100 * np.sqrt(np.mean((theta - TRUTH) ** 2, axis=0))).tolist()}
    out["coverage_pct"] = (100 * np.mean((lower <= TRUTH) & (TRUTH <= upper), axis=0)).tolist()
    out["rmse_x_x100"] = float(100 * np.sqrt(np.mean((xhat - x) ** 2)))
    return out | {"n_ok": int(ok.sum()), "n_failed": int((~ok).sum())}


def interval_metrics(theta, cov, q, xhat, x, ok):
    """`metrics` of the intervals θ̂ ± q·se, se from the covariances; a non-finite se is a failure."""
    theta, se = np.asarray(theta), np.sqrt(np.diagonal(np.asarray(cov), axis1=1, axis2=2))
    ok = np.asarray(ok) & np.all(np.isfinite(se), axis=1)
    return metrics(theta, theta - q * se, theta + q * se, np.asarray(xhat), x, ok)


def _timed(fn, *args):
    """`fn(*args)` compiled ahead of time, then run once: (result, run seconds, compile seconds)."""
    start = time.perf_counter()
    compiled, compile_s = fn.lower(*args).compile(), time.perf_counter() - start
    start = time.perf_counter()
    return jax.block_until_ready(compiled(*args)), time.perf_counter() - start, compile_s


@eqx.filter_jit
def _solve_many(est, problem, Y, theta0):
    return est.solve_many(problem, Y, theta0)


def run_data2ld(t, x, Y, order, continuation):
    est = L.Data2LD(ds.head_impact_basis(0.0, 60.0, order=order), continuation=continuation)
    problem = L.data2ld_problem(ds.head_impact_model(), est.basis, t, Y[0])
    (sol, cov), seconds, compile_s = _timed(_solve_many, est, problem, jnp.asarray(Y), jnp.full(3, 0.01))
    q = scipy.stats.t.ppf(0.975, np.asarray(sol.extras["dof"]))[:, None]
    xhat = jax.vmap(lambda c: L.fitted(problem, c))(sol.extras["coef"])[..., 0]
    return interval_metrics(sol.params, cov, q, xhat, x, sol.result == RESULTS.successful), seconds, compile_s


@eqx.filter_jit
def _nls_batch(est, problems, p0):
    lower, upper = jnp.full(3, -jnp.inf), jnp.full(3, jnp.inf)

    def one(problem):
        sol = est.solve(problem, p0, lower, upper)
        xs, _ = est.trajectories(problem, sol.params, sol.extras["u0"])  # Gaussian noise: u0 is the state
        return sol, est.covariance(problem, sol), xs[0, :, 0]

    return jax.lax.map(one, problems, batch_size=32)  # batches: a vmapped solve waits for its slowest member


def run_nls(t, x, Y):
    est = wj.OutputError(ode_rtol=1e-8, ode_atol=1e-10)
    model = ds.head_impact_model().ode_model()
    observed = np.c_[np.ones_like(t, bool), np.zeros_like(t, bool)]  # x observed, Dx not
    data = [wj.Trajectory(t, np.c_[y, np.zeros_like(y)], observed) for y in Y]
    problems = stack_problems([output_error_problem(model, d, weighted=False, u0=[y[0], 0.0]) for d, y in zip(data, Y)])
    (sol, cov, xhat), seconds, compile_s = _timed(_nls_batch, est, problems, jnp.asarray(TRUTH))
    z = scipy.stats.norm.ppf(0.975)
    return interval_metrics(sol.params, cov, z, xhat, x, sol.result == RESULTS.successful), seconds, compile_s


def spline_problem(t):
    """The Data2LD problem of the order-5 basis of §4 on [0, 60] at the times `t` (zero data):
    its `phi` gives SA its noise variance; SFT samples its penalty."""
    return L.data2ld_problem(ds.head_impact_model(), ds.head_impact_basis(0.0, 60.0, order=5), t, np.zeros_like(t))


def run_sa(t, x, Y, key, n_iter):
    @jax.jit
    def batch(keys, Y, phi):
        def one(key, y):
            coef = jnp.linalg.lstsq(phi, y)[0]  # the noise variance of the energy: least-squares spline residuals
            noise_var = jnp.sum((y - phi @ coef) ** 2) / (t.size - phi.shape[1])
            theta, sse, acc = simulated_annealing(key, t, y, jnp.full(3, 0.01), noise_var, n_iter)
            J = jax.jacfwd(pulse_response)(theta, t)
            return theta, sse / (t.size - theta.size) * jnp.linalg.inv(J.T @ J), pulse_response(theta, t), acc

        return jax.vmap(one)(keys, Y)

    keys = jax.random.split(key, len(Y))
    (theta, cov, xhat, acc), seconds, compile_s = _timed(batch, keys, jnp.asarray(Y), spline_problem(t).phi)
    m = interval_metrics(theta, cov, scipy.stats.norm.ppf(0.975), xhat, x, np.all(np.isfinite(theta), axis=1))
    return m | {"acceptance_rate": float(np.mean(acc))}, seconds, compile_s


@eqx.filter_jit
def _sft_batch(keys, Y, problem, n_iter, burn_in):
    one = lambda k, y: smooth_functional_tempering(k, problem, y, jnp.full(3, 0.01), SFT_LAMBDAS, n_iter, burn_in)  # noqa: E731
    return jax.vmap(one)(keys, Y)


def run_sft(t, x, Y, key, n_iter, burn_in):
    problem, keys = spline_problem(t), jax.random.split(key, len(Y))
    out, seconds, compile_s = _timed(_sft_batch, keys, jnp.asarray(Y), problem, n_iter, burn_in)
    theta, lower, upper, coef, swaps = out
    theta, xhat = np.asarray(theta), np.asarray(coef) @ np.asarray(problem.phi).T
    m = metrics(theta, np.asarray(lower), np.asarray(upper), xhat, x, np.all(np.isfinite(theta), axis=1))
    return m | {"swap_acceptance_rate": float(np.mean(swaps))}, seconds, compile_s


def main():
    ap = parser(__doc__)
    ap.add_argument("--replicates", type=int, default=1000)
    ap.add_argument("--nls-replicates", type=int, default=1000, help="NLS on the first replicates only")
    ap.add_argument("--pc-replicates", type=int, default=1000, help="PC on the first replicates only")
    ap.add_argument("--sa-iterations", type=int, default=5000)
    ap.add_argument("--sft-iterations", type=int, default=5000)
    ap.add_argument("--sft-burn-in", type=int, default=1000)
    args = ap.parse_args()
    cells = []
    for sigma, N in ((sigma, N) for sigma in SIGMAS for N in NS):
        t = np.linspace(0, 60, N)
        x = ds.head_impact_solution(t)
        seed = int(1000 * N + 100 * sigma)
        Y = x + sigma * np.ptp(x) * np.random.default_rng(seed).standard_normal((args.replicates, N))
        key = jax.random.PRNGKey(seed)
        row = {"sigma": sigma, "N": N, "replicates": args.replicates}
        for name, run, extra in (
            ("Data2LD", run_data2ld, (5, L.Ladder())),
            ("Data2LD order 6", run_data2ld, (6, L.Ladder())),
            ("PC", run_data2ld, (5, L.GCV())),
            ("NLS", run_nls, ()),
            ("SA", run_sa, (jax.random.fold_in(key, 1), args.sa_iterations)),
            ("SFT", run_sft, (jax.random.fold_in(key, 2), args.sft_iterations, args.sft_burn_in)),
        ):
            reps = min({"NLS": args.nls_replicates, "PC": args.pc_replicates}.get(name, args.replicates), len(Y))
            m, seconds, compile_s = run(t, x, Y[:reps], *extra)
            row[name] = m | dict(seconds_cell=seconds, seconds_per_fit=seconds / reps, compile_seconds=compile_s)
            row[name]["replicates"] = reps
            print(f"σ={sigma} N={N} {name}: 100·RMSE {np.round(m['rmse_theta_x100'], 2)}, {seconds:.1f} s")
        cells.append(row)
        write(args, cells)


def write(args, cells):
    out = {"date": datetime.date.today().isoformat(), "machine": machine_info(), "args": vars(args), "cells": cells}
    out["paper"] = {"rmse": {str(k): v for k, v in PAPER_RMSE.items()}, "rmse_x": PAPER_X}
    out["paper"]["coverage"] = {str(k): v for k, v in PAPER_COVERAGE.items()}

    cell = lambda v, ref: f"{v:.2f}" + (f" / {ref}" if ref is not None else "")  # noqa: E731  (ours / paper's)
    by_sigma = {s: [c for c in cells if c["sigma"] == s] for s in SIGMAS if any(c["sigma"] == s for c in cells)}
    tables = []
    for title, key, paper in (
        ("100·RMSE(θ̂) (Table 1)", "rmse_theta_x100", PAPER_RMSE),
        ("95 % coverage, % (Table 2)", "coverage_pct", PAPER_COVERAGE),
    ):
        rows = [
            [sigma, method, *(cell(c[method][key][j], ref[3 * j + i]) for j in range(3) for i, c in enumerate(cs))]
            for sigma, cs in by_sigma.items()
            for method in METHODS
            for ref in [paper[sigma].get(method) or [None] * 9]
        ]
        tables += [
            f"## {title}",
            markdown_table("σ | method | β₀ N=21 | 51 | 101 | β₁ 21 | 51 | 101 | α 21 | 51 | 101", rows),
        ]
    x_ref = lambda method, sigma: PAPER_X.get(method, {}).get(sigma) or [None] * 3  # noqa: E731
    x_rows = [
        [method, sigma, *(cell(c[method]["rmse_x_x100"], x_ref(method, sigma)[i]) for i, c in enumerate(cs))]
        for method in METHODS
        for sigma, cs in by_sigma.items()
    ]
    time_rows = [
        [c["sigma"], c["N"], m, r["replicates"], f"{r['seconds_cell']:.1f}", f"{1000 * r['seconds_per_fit']:.1f}"]
        + [r["n_failed"], f"{r['compile_seconds']:.1f}"]
        for c in cells
        for m, r in ((m, c[m]) for m in METHODS)
    ]
    lines = paragraphs(
        "# Carey & Ramsay 2021 §5 simulation study: ours beside the paper",
        provenance(out["machine"], ". Each cell: ours / paper"),
        *tables,
        "## 100·RMSE(x̂) at the data points (Table 3)",
        markdown_table("method | σ | N=21 | 51 | 101", x_rows),
        "## Time",
        markdown_table("σ | N | method | replicates | s per cell | ms per fit | failed | compile s", time_rows),
        "Paper (MATLAB, 4 GHz iMac): 3.64 s per Data2LD fit, 284.67 s per NLS fit, 36.65 s per PC fit, "
        "1844.18 s per SA fit, 3677.57 s per SFT fit.",
        "Compile time is measured apart (ahead-of-time `lower().compile()`), then each method runs once.",
    )
    write_results("data2ld_simulation", out, lines)


if __name__ == "__main__":
    main()
