"""wendyjax against scipy's forward-solve least squares (FSNLS): WENDy-MLE, or output error (`--estimator oe`).

    OPENBLAS_THREAD_TIMEOUT=4 python benchmarks/wendy_vs_fsnls.py [--estimator oe] [--quick]

scipy: `solve_ivp` (RK45, rtol 1e-6, atol 1e-8) in `least_squares` (LM, max_nfev 600) fitting (p, u0) from p₀ and the
first data row, unbounded; a failed or over-budget forward solve gives residual 1e6 where it stops. wendyjax: the
jitted solve, medians of repeated calls after the first (compile = first − median). Data key `PRNGKey(seed)`.

WENDy-MLE (Rummel et al. 2025 Table 2): Lorenz, M = 1024, p₀ ~ U(box) (`default_rng(1000 + seed)`), `weak_likelihood`
+ `MLE(start="best").solve` in the box (time = build + solve), 50 000 rhs calls per scipy solve: `wendy_vs_fsnls`.

Output error: Lorenz (M = 1024, [0, 10]) and FitzHugh–Nagumo (M = 1024, [0, 25]), 5 % noise, p₀ = p*·(1 + 0.1·v),
v ~ U(−1, 1); both unweighted least squares on (p, u₀), `OutputError().solve`, 200 000 rhs calls per scipy solve:
`output_error_vs_scipy`.
"""

import time
import warnings
from statistics import median

import _common as cm
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy
from scipy.integrate import solve_ivp
from scipy.optimize import least_squares

import wendyjax as wj
from wendyjax.estimators import OutputError, output_error_problem

RTOL, ATOL, MAX_NFEV = 1e-6, 1e-8, 600  # scipy's max_nfev: its default 100·n; the Jacobian's calls are not counted
FAIL_RESIDUAL = 1e6  # residual entry for samples a failed forward solve does not reach
# per estimator: systems, noise levels, rhs calls per scipy solve, required speed-up, results stem
PROTOCOL = {
    "mle": dict(systems=("lorenz",), noise=[0.05, 0.10], max_rhs=50_000, name="wendy_vs_fsnls"),
    "oe": dict(systems=("lorenz", "fitzhugh_nagumo"), noise=[0.05], max_rhs=200_000, name="output_error_vs_scipy"),
}
MLE = wj.MLE(start="best")
_solve_mle = eqx.filter_jit(lambda lik, p0, lo, hi: MLE.solve(lik, p0, lo, hi))
_solve_oe = jax.jit(OutputError().solve)


def scipy_rhs(name):
    """The right-hand side of `wj.models.<name>` (p = (σ, ρ, β) or p1 … p6), for `solve_ivp`."""
    if name == "lorenz":
        return lambda t, u, s, r, b: [s * (u[1] - u[0]), u[0] * (r - u[2]) - u[1], u[0] * u[1] - b * u[2]]
    return lambda t, u, p1, p2, p3, p4, p5, p6: [p1 * u[0] + p2 * u[0] ** 3 + p3 * u[1], p4 * u[0] + p5 + p6 * u[1]]


class _RhsBudgetExceeded(Exception):
    pass


def rel_err(p, p_true) -> float:
    p, p_true = np.asarray(p, float), np.asarray(p_true, float)
    return float(np.linalg.norm(p - p_true) / np.linalg.norm(p_true))


def fit_scipy(rhs, data, p0, p_true, max_nfev, max_rhs):
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
                sol = solve_ivp(budgeted, (t[0], t[-1]), theta[n_params:], t_eval=t, rtol=RTOL, atol=ATOL)
            n = sol.y.shape[1] if sol.y.ndim == 2 else 0
            counts["ivp_failures"] += sol.status < 0 or n < len(t)
            sim[:n] = sol.y.T[:n]
        except _RhsBudgetExceeded:
            counts["ivp_budget_stops"] += 1
        r = sim - u_data
        r[~np.isfinite(r)] = FAIL_RESIDUAL
        return r.ravel()

    t0 = time.perf_counter()
    res = least_squares(residual, np.concatenate([np.asarray(p0, float), u_data[0]]), method="lm", max_nfev=max_nfev)
    wall = time.perf_counter() - t0
    p = res.x[:n_params]
    out = dict(params=p.tolist(), u0=res.x[n_params:].tolist(), rel_err=rel_err(p, p_true))
    out |= dict(time_s=wall, nfev=int(res.nfev), **counts, status=int(res.status), message=res.message)
    out |= dict(hit_cap=bool(res.status == 0), converged=bool(res.status > 0), cost=float(res.cost))
    return out


def fit_ours(estimator, b, data, p0, quick):
    """The jitted wendyjax fit: its estimate, status and timings (MLE: the build and the solve)."""
    p0 = jnp.asarray(p0, dtype=jnp.float64)
    out = {}
    if estimator == "mle":
        lik, t_build = cm.bench(wj.weak_likelihood, b.model, data, cfg=(1, 0.0, 1.0, 1) if quick else (3, 0.0, 5.0, 3))
        lo, hi = (jnp.asarray(x, float) for x in b.model.bounds)
        sol, t_solve = cm.bench(_solve_mle, lik, p0, lo, hi, cfg=(2, 0.0, 1.0, 1) if quick else (5, 0.5, 5.0, 3))
        out = {"K": lik.problem.phi.shape[1], "build_s": t_build["median_s"], "solve_s": t_solve["median_s"]}
    else:
        problem = output_error_problem(b.model, data, weighted=False)
        sol, t_solve = cm.bench(
            _solve_oe, problem, p0, *(jnp.full(len(p0), x) for x in (-jnp.inf, jnp.inf)), cfg=(3, 0.5, 10.0, 2)
        )
        t_build = {"median_s": 0.0}
    out |= dict(params=np.asarray(sol.params).tolist(), rel_err=rel_err(sol.params, b.p_true), steps=int(sol.num_steps))
    out |= dict(status=wj.RESULTS[sol.result] or "successful", converged=bool(np.all(np.asarray(sol.successful))))
    out |= dict(objective=float(sol.objective), time_s=t_build["median_s"] + t_solve["median_s"], solve=t_solve)
    return out | {"compile_s": t_solve["compile_s"]}


def summarise(system, noise, runs):
    ws, ss = [r["wendyjax"] for r in runs], [r["scipy"] for r in runs]
    keys = ("rel_err", "steps", "time_s") + (("build_s", "solve_s") if "solve_s" in ws[0] else ())
    w = {f"median_{k}": median(x[k] for x in ws) for k in keys}
    s = {f"median_{k}": median(x[k] for x in ss) for k in ("rel_err", "time_s", "nfev", "forward_solves")}
    out = dict(system=system, noise_ratio=noise, n_fits=len(runs), wendyjax=w, scipy=s, compile_s=ws[0]["compile_s"])
    out |= {f"scipy_{k}": sum(x[k] > 0 for x in ss) for k in ("ivp_failures", "ivp_budget_stops")}
    out |= dict(wendyjax_unsuccessful=sum(not x["converged"] for x in ws), scipy_hit_cap=sum(x["hit_cap"] for x in ss))
    out["scipy_not_converged"] = sum(not x["converged"] for x in ss)
    return out | {"speedup": s["median_time_s"] / w["median_time_s"]}


def main():
    ap = cm.parser(__doc__)
    ap.add_argument("--estimator", choices=("mle", "oe"), default="mle", help="WENDy-MLE or output error")
    ap.add_argument("--quick", action="store_true", help="smoke run: 2 seeds (WENDy-MLE: scipy's max_nfev 10)")
    ap.add_argument("--seeds", type=int, default=None, help="seeds per noise level (default 10, --quick: 2)")
    ap.add_argument("--noise", type=float, nargs="+", help="noise ratios (default: WENDy-MLE 0.05 0.1, OE 0.05)")
    ap.add_argument("--name", help="results file stem (default wendy_vs_fsnls, output_error_vs_scipy)")
    args = ap.parse_args()
    proto = PROTOCOL[args.estimator]
    seeds, noises = range(args.seeds or (2 if args.quick else 10)), args.noise or proto["noise"]
    max_nfev = 10 if args.quick and args.estimator == "mle" else MAX_NFEV
    info = {**cm.machine_info(), "scipy": scipy.__version__}
    print(f"{args.estimator} vs scipy RK45 + LM; {cm.machine_line(info)}; {len(seeds)} seeds × noise {noises}")
    runs, summary = [], []
    for system in proto["systems"]:
        b, rhs = getattr(wj.models, system)(), scipy_rhs(system)
        p_true = np.asarray(b.p_true, float)
        solve_ivp(rhs, (0.0, 1.0), np.asarray(b.u0, float), args=tuple(p_true))  # scipy's first-call overheads
        for noise in noises:
            cell = []
            for seed in seeds:
                data = b.simulate(jax.random.PRNGKey(seed), noise, subsample=1)
                rng = np.random.default_rng(1000 + seed)
                box = rng.uniform(*np.asarray(b.model.bounds, float)) if args.estimator == "mle" else None
                p0 = p_true * (1 + 0.1 * rng.uniform(-1, 1, len(p_true))) if box is None else box
                w = fit_ours(args.estimator, b, data, p0, args.quick)
                s = fit_scipy(rhs, data, p0, p_true, max_nfev, proto["max_rhs"])
                cell.append(dict(system=system, noise_ratio=noise, seed=seed, p0=p0.tolist(), wendyjax=w, scipy=s))
                print(
                    f"{system} {noise:g} seed {seed}: wendyjax {w['rel_err']:.2e} in {w['time_s']:.3f} s, scipy "
                    f"{s['rel_err']:.2e} in {s['time_s']:.2f} s (status {s['status']})",
                    flush=True,
                )
            runs += cell
            summary.append(summarise(system, noise, cell))

    rows = []
    for e in summary:
        w, s = e["wendyjax"], e["scipy"]
        rows.append(
            [e["system"], f"{100 * e['noise_ratio']:g} %", e["n_fits"], f"{1e3 * w['median_time_s']:.1f}"]
            + [f"{1e3 * w[k]:.1f}" if k in w else "—" for k in ("median_build_s", "median_solve_s")]
            + [f"{e['compile_s']:.2f}", f"{w['median_steps']:g}", f"{w['median_rel_err']:.3g}"]
            + [f"{1e3 * s['median_time_s']:.1f}", f"{s['median_nfev']:g} ({s['median_forward_solves']:g} solves)"]
            + [f"{s['median_rel_err']:.3g}", f"{e['speedup']:.1f}x", e["wendyjax_unsuccessful"]]
            + [e["scipy_not_converged"], f"{e['scipy_hit_cap']} of {e['n_fits']}"]
            + [f"{e['scipy_ivp_failures']} / {e['scipy_ivp_budget_stops']}"]
        )
    name = args.name or proto["name"]
    protocol = {k: v for k, v in proto.items() if k != "name"} | {"noise": noises, "seeds": list(seeds)}
    protocol |= {"scipy": {"rtol": RTOL, "atol": ATOL, "max_nfev": max_nfev, "fail_residual": FAIL_RESIDUAL}}
    data = {"script": "benchmarks/wendy_vs_fsnls.py", "date": cm.utc_now(), "estimator": args.estimator}
    data |= {"quick": args.quick, "machine": info, "protocol": protocol, "summary": summary, "runs": runs}
    doc = __doc__.split("\n\n")
    md = cm.paragraphs(
        f"# {'WENDy-MLE' if args.estimator == 'mle' else 'Output error'}: wendyjax vs scipy's forward-solve NLS",
        cm.provenance(info, " — **quick smoke run: not a result**" if args.quick else ""),
        *(" ".join(doc[i].split()) for i in (2, 3 if args.estimator == "mle" else 4)),  # scipy's, then ours
        "## Per-fit medians",
        cm.markdown_table(
            "system | noise | seeds | wendyjax ms/fit | build ms | solve ms | compile s | steps | wendyjax err "
            "| scipy ms/fit | scipy nfev | scipy err | speed-up | wendyjax unsuccessful | scipy not converged "
            "| scipy hit cap | fits w/ failed / over-budget solves",
            rows,
        ),
        "Every seed's fits (estimates, errors, steps, statuses, times): `runs` in the JSON.",
    )
    cm.write_results(name, data, md, indent=2, default=float, echo=True)


if __name__ == "__main__":
    main()
