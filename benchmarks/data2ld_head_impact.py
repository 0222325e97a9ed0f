"""Carey & Ramsay 2021 §4 and §3.2: Data2LD's head-impact fit (Figs. 3–4) and the landscape of H(θ|ρ) (Fig. 2).

    python benchmarks/data2ld_head_impact.py       # ~2 min on 2 CPU cores

§4: `wj.datasets.head_impact()`, basis orders 5 and 6, the ρ ladder and the adaptive rule, Gauss–Newton and implicit
covariances, the order-6 ladder's stage γ = 9. Fig. 2: H on a 201 × 201 grid of (β₀, β₁) at α = 0.39 for four ρ on
the §3.2 data. Writes `data2ld_head_impact.*` (with the Figs. 3–4 plots) and `data2ld_landscape.*`.
"""

import datetime
import functools
import time

import _common as cm
import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats

import wendyjax as wj
from wendyjax import datasets as ds, linear as L

PAPER = {"theta": [-0.057, -0.15, 0.40], "half": [0.005, 0.03, 0.06], "df": 2.45, "mse": 0.05}
RHOS = (0.99, 0.95, 0.71, 0.50)
BETA0, BETA1, ALPHA = np.linspace(-0.55, 0.45, 201), np.linspace(-0.65, 0.35, 201), 0.39
PAPER_MIN = {0.99: (-0.05, -0.15), 0.50: (-0.05, -0.10)}  # Fig. 2; the ρ = 0.50 point depends on the noise draw


def run(order, continuation, covariance, data):
    est = L.Data2LD(
        ds.head_impact_basis(order=order), continuation=L.Ladder() if continuation == "ladder" else L.Adaptive()
    )
    seconds = []
    for _ in range(2):  # the second call is compiled
        start = time.perf_counter()
        fit = est.fit(ds.head_impact_model(), data, covariance=covariance)
        seconds.append(time.perf_counter() - start)
    lo, hi = fit.ci(0.95)
    row = {"order": order, "continuation": continuation, "covariance": covariance, "status": fit.message or "ok"}
    row |= {"gamma": fit.gamma, "rho": fit.rho, "theta": fit.params.tolist(), "half_width": ((hi - lo) / 2).tolist()}
    row |= {"df": fit.df, "mse": fit.mse, "gcv": fit.gcv, "gauss_newton_steps": fit.num_steps}
    return fit, row | {"seconds_first_call": seconds[0], "seconds_per_fit": seconds[1]}


def head_impact():
    data = ds.head_impact()
    rows, fits = [], {}
    for key in ((o, c, v) for o in (6, 5) for c in ("ladder", "adaptive") for v in ("gauss_newton", "implicit")):
        fits[key], row = run(*key, data)
        rows.append(row)
        print(key, np.round(row["theta"], 4), row["seconds_per_fit"], flush=True)
    ref = fits[6, "ladder", "gauss_newton"]
    i9 = int(np.flatnonzero(ref.path["gamma"] == 9.0)[0])
    unc9 = L.uncertainty(ref.problem, jnp.asarray(ref.path["theta"][i9]), L.rho_of(9.0))
    half9 = scipy.stats.t.ppf(0.975, float(unc9.dof)) * ref.path["stderr"][i9]
    at9 = {"theta": ref.path["theta"][i9].tolist(), "df": float(unc9.df), "half_width": half9.tolist()}
    out = {"date": datetime.date.today().isoformat(), "machine": cm.machine_info(), "paper": PAPER, "runs": rows}
    out["order6_ladder_gamma9"] = at9
    out["path_order6_ladder"] = {k: np.asarray(v).tolist() for k, v in ref.path.items()}

    def f4(values):
        return "(" + ", ".join(f"{v:.4f}" for v in values) + ")"

    table = [
        ["paper", "", "", '"ρ = 0.99"', *PAPER["theta"], PAPER["half"], PAPER["df"], PAPER["mse"], "3.64 (MATLAB)"]
    ]
    table += [
        [r["order"], r["continuation"], r["covariance"], f"{r['gamma']:g}", *(f"{v:.4f}" for v in r["theta"])]
        + [f4(r["half_width"]), f"{r['df']:.3f}", f"{r['mse']:.4f}", f"{r['seconds_per_fit']:.3f}"]
        for r in rows
    ]
    lines = cm.paragraphs(
        "# Data2LD on the head-impact data (Carey & Ramsay 2021 §4)",
        cm.provenance(out["machine"]),
        cm.markdown_table(
            "order | continuation | covariance | γ̂ | β̂₀ | β̂₁ | α̂ | 95 % half-widths | df | MSE | s/fit", table
        ),
        f"Order 6, code ladder, stage γ = 9: θ̂ = {f4(at9['theta'])}, half-widths {f4(at9['half_width'])}, "
        f"df = {at9['df']:.3f} (the paper's df; the code's ρ̂ rule picks γ = 8.5 on our fully converged stages).",
        "s/fit: a second call (compiled); the first call adds the compilation.",
    )
    cm.write_results("data2ld_head_impact", out, lines, echo=True)
    cm.save_figure(wj.plot.bands(ref)[0], "data2ld_head_impact_bands")
    cm.save_figure(wj.plot.continuation(ref, min_rho=0.95)[0], "data2ld_head_impact_path")


def landscape():
    t = np.linspace(0.0, 60.0, 101)
    y = ds.head_impact_solution(t) + 0.05 * np.random.default_rng(2).standard_normal(t.size)
    b0, b1 = np.meshgrid(BETA0, BETA1)
    thetas = jnp.asarray(np.stack([b0.ravel(), b1.ravel(), np.full(b0.size, ALPHA)], axis=1))
    results, table = {}, []
    fig, axes = cm.pyplot().subplots(2, len(RHOS), figsize=(4 * len(RHOS), 7.5), constrained_layout=True)
    for row, order in enumerate((5, 6)):
        problem = L.data2ld_problem(ds.head_impact_model(), ds.head_impact_basis(0.0, 60.0, order=order), t, y)
        on_grid = jax.jit(jax.vmap(functools.partial(L.criterion, problem), in_axes=(0, None)))
        results[order] = []
        for ax, rho in zip(axes[row], RHOS):
            h = np.asarray(on_grid(thetas, rho)).reshape(b0.shape)
            i, j = np.unravel_index(np.nanargmin(h), h.shape)
            found = {"rho": rho, "argmin": [float(BETA0[j]), float(BETA1[i])], "min": float(h[i, j])}
            results[order].append(found | {"max": float(np.nanmax(h)), "non_finite": int((~np.isfinite(h)).sum())})
            paper = PAPER_MIN.get(rho)
            table.append(
                [order, rho, f"({BETA0[j]:.3f}, {BETA1[i]:.3f})", "(%.2f, %.2f)" % paper if paper else "–"]
                + [f"{h[i, j]:.4g}", f"{np.nanmax(h):.4g}"]
            )
            ax.contourf(BETA0, BETA1, np.log10(h), levels=30, cmap="viridis")
            ax.plot(*ds.SIMULATION_THETA[:2], "o", mfc="none", mec="w", ms=9, label="truth")
            ax.plot(BETA0[j], BETA1[i], "*", color="r", ms=11, label="grid minimum")
            ax.set(title=f"order {order}, ρ = {rho}", xlabel="β₀", ylabel="β₁")
        axes[row][0].legend(loc="lower left", fontsize=8)
    fig.suptitle("log₁₀ H(β₀, β₁, α = 0.39 | ρ) (Carey & Ramsay 2021 Fig. 2)")
    cm.RESULTS.mkdir(exist_ok=True)
    fig.savefig(cm.RESULTS / "data2ld_landscape.png", dpi=110)
    out = {"date": cm.utc_now(), "machine": cm.machine_info(), "grid": [len(BETA0), len(BETA1)], "alpha": ALPHA}
    out |= {"noise_seed": 2, "orders": results, "paper_argmin": {str(k): v for k, v in PAPER_MIN.items()}}
    lines = cm.paragraphs(
        "# Landscape of H(θ|ρ) (Carey & Ramsay 2021 Fig. 2)",
        cm.provenance(out["machine"])
        + " Grid minimum of H over β₀ ∈ [−0.55, 0.45], β₁ ∈ [−0.65, 0.35] (201 × 201, step 0.005), α = 0.39; "
        "figure `data2ld_landscape.png`.",
        cm.markdown_table("order | ρ | grid argmin (β₀, β₁) | paper | min H | max H", table),
    )
    cm.write_results("data2ld_landscape", out, lines, echo=True)


if __name__ == "__main__":
    cm.parser(__doc__).parse_args()  # --help; no options
    head_impact()
    landscape()
