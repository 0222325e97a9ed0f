"""Benchmark of the weak likelihood ℓ, its gradient and Hessian against a naive dense reference.

    python benchmarks/likelihood.py           # a few minutes on 2 CPU cores
    python benchmarks/likelihood.py --quick   # smoke run, few repeats

ℓ, ∇ℓ, ∇²ℓ at p* on the same data (K ≈ 200, M = 1024) for Lorenz (linear-in-parameters and general path) and
Goodwin-3D (general, log-normal), against a naive dense assembly (`jax.jacfwd`, `jax.hessian`) and the general
path's Hessian against forward-over-reverse autodiff; the general-path ℓ's GFLOP/s (analytic flop count) against
the float64 matmul peak. Results: `benchmarks/results/likelihood.{json,md}`.
"""

import argparse
import math
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from _common import bench, command, env_prefix, machine_info, machine_line, markdown_table, utc_now, write_results

import wendyjax as wj
from wendyjax.weak import log_space_rhs

DIAG_REG = 1e-10  # the library's default α in (1 − α)S + αI
# targets: LiP ∇²ℓ (Lorenz) vs naive jax.hessian; Goodwin-3D ℓ GFLOP/s / float64 matmul peak; cost(∇ℓ) / cost(ℓ)
MIN_SPEEDUP, MIN_PEAK_FRACTION, MAX_GRAD_OVER_NLL = 20.0, 0.30, 4.0
QUANTITIES = ("nll", "grad", "hessian")


@eqx.filter_jit
def autodiff_hessian(lik, p):
    """∇²ℓ by forward-over-reverse autodiff of ℓ: the general path's Hessian before 2026-11-27."""
    return jax.jacfwd(jax.grad(wj.weak.nll, argnums=1), argnums=1)(lik, p)


def make_naive(rhs):
    """Dense WENDy likelihood of one trajectory, S = L Σ Lᵀ with L = ∂r/∂vec(U) from `jax.jacfwd`; vec is
    state-major (entry d·K + k of r is state d, test function k). All data are arguments of the jitted functions."""

    def weak_residual(U, p, phi, dphi, t):
        F = jax.vmap(rhs, in_axes=(0, None, 0))(U, p, t)  # (N, D)
        return (phi @ F).T.reshape(-1) + (dphi @ U).T.reshape(-1)  # r = vec(Φ F) − b, b = −vec(Φ̇ U)

    def nll(p, phi, dphi, u, t, var):
        n, d = u.shape
        r = weak_residual(u, p, phi, dphi, t)
        jac = jax.jacfwd(weak_residual, argnums=0)(u, p, phi, dphi, t)  # (DK, N, D)
        L = jnp.swapaxes(jac, 1, 2).reshape(r.shape[0], d * n)  # columns in vec(U) order
        S = (L * jnp.repeat(var, n)[None, :]) @ L.T
        C = jnp.linalg.cholesky((1.0 - DIAG_REG) * S + DIAG_REG * jnp.eye(r.shape[0], dtype=S.dtype))
        w = jax.scipy.linalg.solve_triangular(C, r, lower=True)
        return 0.5 * (2.0 * jnp.sum(jnp.log(jnp.diagonal(C))) + w @ w + r.shape[0] * math.log(2.0 * math.pi))

    return {
        "nll": jax.jit(nll),
        "grad": jax.jit(jax.grad(nll)),
        "hessian": jax.jit(jax.hessian(nll)),
        "residual": jax.jit(weak_residual),
    }


def flops(kind, K, N, D, J):
    """Analytic flops of one ℓ (one trajectory). general: two weighted-Gram families (Φ–Φ, Φ̇–Φ), each one
    (K×N)·(N×D²K) product, Cholesky, a solve, vec(Φ F); lip: S = Σ_q c_q Ŝ_q, g = Gp, Cholesky, a solve;
    naive: jacfwd of Φ F and Φ̇ U over DN tangents, L Σ Lᵀ, Cholesky."""
    dk, dn, fam = D * K, D * N, 2 * K * N * D * D * K
    parts = {
        "general": {
            "gram_phi_phi": fam,
            "gram_dphi_phi": fam,
            "cholesky": dk**3 / 3,
            "triangular_solve": dk**2,
            "phi_F": 2 * K * N * D,
        },
        "lip": {
            "S_sum": 2 * ((J + 1) * (J + 2) // 2) * dk * dk,
            "g": 2 * dk * J,
            "cholesky": dk**3 / 3,
            "triangular_solve": dk**2,
        },
        "naive": {
            "jacfwd_phi_F": 2 * K * N * D * dn,
            "jacfwd_dphi_U": 2 * K * N * D * dn,
            "L_Sigma_LT": 2 * dk * dk * dn,
            "cholesky": dk**3 / 3,
        },
    }[kind]
    return {**parts, "total": sum(parts.values())}


def matmul_peak(cfg, sizes=(1024, 2048)):
    out = {}
    for n in sizes:
        a, b = (jax.random.normal(k, (n, n), dtype=jnp.float64) for k in jax.random.split(jax.random.key(n)))
        _, out[str(n)] = bench(jax.jit(jnp.matmul), a, b, cfg=cfg)
        out[str(n)]["gflops"] = 2 * n**3 / out[str(n)]["median_s"] / 1e9
        print(f"  float64 matmul n={n}: {out[str(n)]['gflops']:.1f} GFLOP/s")
    return out, max(v["gflops"] for v in out.values())


def rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def ms(s):
    return f"{1e3 * s:.2f}"


def timing_row(model, path, c):
    others = [c[k]["other_processes_cores"] for k in QUANTITIES if c[k].get("other_processes_cores") is not None]
    return [
        model,
        path,
        c["K"],
        *(ms(c[k]["median_s"]) for k in QUANTITIES),
        f"{c['grad_over_nll']:.2f}",
        f"{c['hessian']['median_s'] / c['nll']['median_s']:.2f}",
        f"{c['gflops_nll']:.1f}",
        "/".join(f"{c[k]['compile_s']:.2f}" for k in QUANTITIES),
        "/".join(str(c[k]["repeats"]) for k in QUANTITIES),
        f"{max(others):.2f}" if others else "n/a",
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="few repeats (smoke run)")
    args = ap.parse_args()
    cfg = (
        {"min_reps": 2, "min_time": 0.0, "max_time": 2.0, "floor_reps": 1}
        if args.quick
        else {"min_reps": 7, "min_time": 1.0, "max_time": 10.0, "floor_reps": 5}
    )
    # the naive Hessians take seconds per call: keep ≥ 3 repeats within budget
    naive_cfg = cfg if args.quick else {"min_reps": 5, "min_time": 1.0, "max_time": 12.0, "floor_reps": 3}
    t_start, info = time.perf_counter(), machine_info()
    print(f"wendyjax likelihood benchmark ({'quick' if args.quick else 'full'} run) on {machine_line(info)}")
    mm_start, peak = matmul_peak(cfg)  # measured again at the end; the best of both is the peak

    tf_cfg = wj.TestFunctionConfig(min_info=1.0, k_max=200)
    setups = [
        ("lorenz", wj.models.lorenz, "gaussian", [("default (LiP)", None), ("general", False)]),
        ("goodwin_3d", wj.models.goodwin_3d, "lognormal", [("default (general)", None)]),
    ]
    cases, naive_res = [], {}
    for mname, factory, noise, paths in setups:
        zoo = factory()
        data = zoo.simulate(jax.random.key(0))
        p = jnp.asarray(zoo.p_true, dtype=jnp.float64)
        liks = {}
        for pname, linear in paths:
            t0 = time.perf_counter()
            lik = jax.block_until_ready(
                wj.weak_likelihood(zoo.model, data, noise, test_functions=tf_cfg, linear=linear)
            )
            R, K, N = lik.problem.phi.shape
            D, J = lik.problem.n_states, zoo.model.n_params
            case = {
                "model": mname,
                "path": pname,
                "noise": noise,
                "linear": lik.linear is not None,
                "K": K,
                "K_real": int(np.sum(np.asarray(lik.problem.kmask[0]))),
                "N": N,
                "D": D,
                "J": J,
                "R": R,
                "build_s": time.perf_counter() - t0,
            }
            print(f"{mname} [{pname}]: K = {K}, N = {N}, D = {D}, J = {J}, build {case['build_s']:.2f} s")
            out = {}
            for k, fn in zip(QUANTITIES, (wj.weak.nll, wj.weak.nll_grad, wj.weak.nll_hessian)):
                out[k], case[k] = bench(fn, lik, p, cfg=cfg)
            case.update(
                nll_value=float(out["nll"]),
                grad_over_nll=case["grad"]["median_s"] / case["nll"]["median_s"],
                hess_over_nll=case["hessian"]["median_s"] / case["nll"]["median_s"],
            )
            if lik.linear is None:
                ad, case["autodiff_hessian"] = bench(autodiff_hessian, lik, p, cfg=cfg)
                case["hess_speedup_vs_autodiff"] = case["autodiff_hessian"]["median_s"] / case["hessian"]["median_s"]
                case["autodiff_hessian_rel"] = rel(out["hessian"], ad)
            case["flops"] = flops("lip" if case["linear"] else "general", K, N, D, J)
            case["gflops_nll"] = case["flops"]["total"] / case["nll"]["median_s"] / 1e9
            liks[pname] = (lik, out)
            cases.append(case)

        # --- naive reference on trajectory 0 of the first path's problem
        lik0, out0 = liks[paths[0][0]]
        prob = lik0.problem
        naive = make_naive(log_space_rhs(zoo.model.rhs) if prob.log_space else zoo.model.rhs)
        mask = np.asarray(prob.kmask[0]) > 0
        phi, dphi = jnp.asarray(np.asarray(prob.phi[0])[mask]), jnp.asarray(np.asarray(prob.dphi[0])[mask])
        nargs = (p, phi, dphi, prob.u[0], prob.t[0], prob.sigma[0] ** 2)
        (N, D), K = prob.u[0].shape, phi.shape[0]
        print(f"{mname} [naive dense]: L is {D * K} × {D * N}")
        nr = {"K": K, "N": N, "D": D, "compared_with_path": paths[0][0]}
        nout = {}
        for k in QUANTITIES:
            nout[k], nr[k] = bench(naive[k], *nargs, cfg=naive_cfg)
        r_naive = naive["residual"](prob.u[0], p, phi, dphi, prob.t[0])
        nr["agreement"] = {
            "residual_rel": rel(r_naive, np.asarray(wj.weak.residual(lik0, p)[0])[np.tile(mask, D)]),
            "nll_rel": rel(nout["nll"], out0["nll"]),
            "grad_rel": rel(nout["grad"], out0["grad"]),
            "hessian_rel": rel(nout["hessian"], out0["hessian"]),
            **{f"nll_rel[{k}]": rel(nout["nll"], o["nll"]) for k, (_, o) in liks.items()},
        }
        nr.update(
            nll_value=float(nout["nll"]),
            flops=flops("naive", K, N, D, 0),
            grad_over_nll=nr["grad"]["median_s"] / nr["nll"]["median_s"],
        )
        nr["gflops_nll"] = nr["flops"]["total"] / nr["nll"]["median_s"] / 1e9
        if len(liks) > 1:
            (_, a), (_, b) = list(liks.values())[:2]
            nr["paths_agreement"] = {f"{k}_rel": rel(a[k], b[k]) for k in QUANTITIES}
        print(
            f"  naive vs library (ℓ must agree to 1e-9): {nr['agreement']}; LiP vs general path: "
            f"{nr.get('paths_agreement')}"
        )
        naive_res[mname] = nr

    mm_end, peak_end = matmul_peak(cfg)  # again, now that the machine is warm
    mm_times, peak = {"start": mm_start, "end": mm_end}, max(peak, peak_end)
    for c in cases:
        c["peak_fraction_nll"] = c["gflops_nll"] / peak

    lor_lip = next(c for c in cases if c["model"] == "lorenz" and c["linear"])
    gw = next(c for c in cases if c["model"] == "goodwin_3d")
    speedup = naive_res["lorenz"]["hessian"]["median_s"] / lor_lip["hessian"]["median_s"]
    fraction = gw["peak_fraction_nll"]
    targets = [
        dict(zip(("name", "value", "target", "met", "shown"), t))
        for t in [
            (
                "LiP Hessian speed-up vs naive jax.hessian (Lorenz, default path)",
                speedup,
                f">= {MIN_SPEEDUP:.0f}x",
                speedup >= MIN_SPEEDUP,
                f"{speedup:.1f}x",
            ),
            (
                "NiP ℓ fraction of float64 matmul peak (Goodwin-3D)",
                fraction,
                f">= {100 * MIN_PEAK_FRACTION:.0f}% of {peak:.1f} GFLOP/s",
                fraction >= MIN_PEAK_FRACTION,
                f"{100 * fraction:.1f}% ({gw['gflops_nll']:.1f} GFLOP/s)",
            ),
            *(
                (
                    f"∇ℓ cost / ℓ cost ({c['model']}, {c['path']})",
                    c["grad_over_nll"],
                    f"<= {MAX_GRAD_OVER_NLL:.0f}",
                    c["grad_over_nll"] <= MAX_GRAD_OVER_NLL,
                    f"{c['grad_over_nll']:.2f}",
                )
                for c in cases
            ),
        ]
    ]
    total_s = time.perf_counter() - t_start
    result = {
        "script": "benchmarks/likelihood.py",
        "date": utc_now(),
        "quick": args.quick,
        "repeat_config": {"library": cfg, "naive": naive_cfg},
        "machine": info,
        "matmul_float64": {"sizes": mm_times, "peak_gflops": peak},
        "test_functions": {"min_info": 1.0, "k_max": 200},
        "cases": cases,
        "naive": naive_res,
        "targets": targets,
        "total_time_s": total_s,
    }
    paths = write_results("likelihood", result, indent=2, default=float)  # the data first
    general = [c for c in cases if not c["linear"]]
    md = [
        "# Weak likelihood benchmark",
        "",
        f"Generated by `{' '.join(x for x in (env_prefix(), command()) if x)}` on {result['date']}.",
        "",
        f"Machine: {machine_line(info)}, {info['uname']['system']} {info['uname']['release']}; float64.",
        f"float64 matmul peak: **{peak:.1f} GFLOP/s** ("
        + "; ".join(
            f"{when}: " + ", ".join(f"n={n}: {v['gflops']:.1f}" for n, v in d.items()) for when, d in mm_times.items()
        )
        + ").",
        "",
        "Medians after compilation; compile = first call − median. Naive = dense L = ∂r/∂vec(U) by `jax.jacfwd`, "
        "S = LΣLᵀ, `jax.grad`/`jax.hessian`. GFLOP/s ℓ: the script's analytic flop count over the median time. "
        "'others' cores': CPU used by other processes while that row was timed.",
        "",
        *markdown_table(
            [
                "model",
                "path",
                "K",
                "ℓ ms",
                "∇ℓ ms",
                "∇²ℓ ms",
                "∇ℓ/ℓ",
                "∇²ℓ/ℓ",
                "GFLOP/s ℓ",
                "compile ℓ/∇ℓ/∇²ℓ s",
                "reps",
                "others' cores",
            ],
            [timing_row(c["model"], c["path"], c) for c in cases]
            + [timing_row(m, "naive dense", nr) for m, nr in naive_res.items()],
        ),
        "",
        "## General-path ∇²ℓ vs the forward-over-reverse autodiff it replaced",
        "",
        *markdown_table(
            ["general path", "∇²ℓ ms", "autodiff ∇²ℓ ms", "speed-up", "max rel. diff"],
            [
                [
                    f"{c['model']} [{c['path']}]",
                    ms(c["hessian"]["median_s"]),
                    ms(c["autodiff_hessian"]["median_s"]),
                    f"{c['hess_speedup_vs_autodiff']:.2f}x",
                    f"{c['autodiff_hessian_rel']:.1e}",
                ]
                for c in general
            ],
        ),
        "",
        "## Agreement of the naive reference with the library",
        "",
        *markdown_table(
            ["model", "ℓ rel", "residual rel", "∇ℓ rel", "∇²ℓ rel"],
            [
                [m, *(f"{nr['agreement'][k]:.1e}" for k in ("nll_rel", "residual_rel", "grad_rel", "hessian_rel"))]
                for m, nr in naive_res.items()
            ],
        ),
        "",
        "## Targets",
        "",
        *markdown_table(
            ["target", "measured", "required", "result"],
            [[t["name"], t["shown"], t["target"], "PASS" if t["met"] else "MISS"] for t in targets],
        ),
        "",
        "## Flops of the general-path ℓ",
        "",
        *markdown_table(
            ["general-path ℓ", "Φ-Φ GF", "Φ̇-Φ GF", "chol GF", "total GF", "ℓ ms", "GFLOP/s", "of peak"],
            [
                [
                    f"{c['model']} [{c['path']}]",
                    *(f"{c['flops'][k] / 1e9:.3f}" for k in ("gram_phi_phi", "gram_dphi_phi", "cholesky", "total")),
                    ms(c["nll"]["median_s"]),
                    f"{c['gflops_nll']:.1f}",
                    f"{100 * c['peak_fraction_nll']:.1f}%",
                ]
                for c in general
            ],
        ),
        "",
    ]
    paths += write_results("likelihood", markdown=md)
    print("\n".join(md))
    print(f"wrote {' and '.join(map(str, paths))}")


if __name__ == "__main__":
    main()
