"""Benchmark of the weak likelihood ℓ, its gradient and Hessian against a naive dense reference.

Run from the repository root::

    python benchmarks/likelihood.py           # a few minutes on 2 CPU cores
    python benchmarks/likelihood.py --quick   # smoke run, few repeats

In one process, on the same data (K ≈ 200 test functions, M + 1 = 1025 samples): the library's ℓ,
∇ℓ, ∇²ℓ at p* for Lorenz (linear-in-parameters path and general path) and Goodwin-3D (general,
log-normal); a naive reference (dense L = ∂r/∂vec(U) by `jax.jacfwd`, S = LΣLᵀ, `jax.grad` /
`jax.hessian`); the general path's ∇²ℓ against forward-over-reverse autodiff of ℓ; and the
float64 matmul peak, against which the general-path ℓ's GFLOP/s (analytic flop count) are set.
Medians of repeated calls after compilation. Results: `benchmarks/results/likelihood.{json,md}`.
"""

import argparse
import math
import os
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from _common import (
    bench,
    command,
    cpu_busy_seconds,
    env_prefix,
    idle_check,
    machine_info,
    markdown_table,
    other_cpu_load,
    utc_now,
    write_results,
)

import wendyjax as wj
from wendyjax.weak import log_space_rhs

DIAG_REG = 1e-10  # the library's default α in (1 − α)S + αI

TARGETS = {
    "lip_hessian_speedup": 20.0,  # LiP ∇²ℓ (Lorenz, default path) vs naive jax.hessian
    "nip_peak_fraction": 0.30,  # Goodwin-3D ℓ GFLOP/s / float64 matmul peak
    "grad_over_nll": 4.0,  # cost(∇ℓ) / cost(ℓ), each model/path
}


@eqx.filter_jit
def autodiff_hessian(lik, p):
    """∇²ℓ by forward-over-reverse autodiff of ℓ: the general path's Hessian before 2026-11-27."""
    return jax.jacfwd(jax.grad(wj.weak.nll, argnums=1), argnums=1)(lik, p)


def make_naive(rhs):
    """Dense WENDy likelihood: S = L Σ Lᵀ with L = ∂r/∂vec(U) from `jax.jacfwd`.

    All data are arguments of the jitted functions (nothing large is closed over).
    vec is column-major, i.e. state-major: entry d·K + k of r is (state d, test fn k).
    """

    def weak_residual(U, p, phi, dphi, t):
        F = jax.vmap(rhs, in_axes=(0, None, 0))(U, p, t)  # (N, D)
        b = -(dphi @ U).T.reshape(-1)  # b = −vec(Φ̇ U)
        return (phi @ F).T.reshape(-1) - b  # r = vec(Φ F) − b

    def nll(p, phi, dphi, u, t, var):
        n, d = u.shape
        r = weak_residual(u, p, phi, dphi, t)
        dk = r.shape[0]
        jac = jax.jacfwd(weak_residual, argnums=0)(u, p, phi, dphi, t)  # (DK, N, D)
        L = jnp.swapaxes(jac, 1, 2).reshape(dk, d * n)  # columns in vec(U) order
        sig = jnp.repeat(var, n)  # σ_d² for every sample of state d
        S = (L * sig[None, :]) @ L.T
        S = (1.0 - DIAG_REG) * S + DIAG_REG * jnp.eye(dk, dtype=S.dtype)
        C = jnp.linalg.cholesky(S)
        w = jax.scipy.linalg.solve_triangular(C, r, lower=True)
        logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(C)))
        return 0.5 * (logdet + w @ w + dk * math.log(2.0 * math.pi))

    return {"nll": jax.jit(nll), "grad": jax.jit(jax.grad(nll)), "hessian": jax.jit(jax.hessian(nll)),
            "residual": jax.jit(weak_residual)}


def naive_args(lik, p):
    """(p, Φ, Φ̇, U, t, σ²) of trajectory 0, real test functions only."""
    prob = lik.problem
    mask = np.asarray(prob.kmask[0]) > 0
    return (p, jnp.asarray(np.asarray(prob.phi[0])[mask]), jnp.asarray(np.asarray(prob.dphi[0])[mask]),
            prob.u[0], prob.t[0], prob.sigma[0] ** 2)


def _with_total(parts):
    return {**parts, "total": sum(parts.values())}


def nip_flops(K, N, D):
    """Flops of one general-path ℓ (one trajectory): two weighted-Gram families (Φ–Φ and Φ̇–Φ), each
    one product (K×N)·(N×D²K), Cholesky of the DK×DK matrix, one triangular solve, g = vec(Φ F)."""
    fam, dk = 2 * K * N * D * D * K, D * K
    return _with_total({"gram_phi_phi": fam, "gram_dphi_phi": fam, "cholesky": dk**3 / 3,
                        "triangular_solve": dk**2, "phi_F": 2 * K * N * D})


def lip_flops(K, D, J):
    """Flops of one LiP ℓ: S = Σ_q c_q Ŝ_q (2 per entry and block), g = Gp, Cholesky, solve."""
    dk, q = D * K, (J + 1) * (J + 2) // 2
    return _with_total({"S_sum": 2 * q * dk * dk, "g": 2 * dk * J, "cholesky": dk**3 / 3, "triangular_solve": dk**2})


def naive_flops(K, N, D):
    """Dominant flops of the naive ℓ: jacfwd of Φ F and Φ̇ U over DN tangents, L Σ Lᵀ."""
    dn, dk = D * N, D * K
    return _with_total({"jacfwd_phi_F": 2 * K * N * D * dn, "jacfwd_dphi_U": 2 * K * N * D * dn,
                        "L_Sigma_LT": 2 * dk * dk * dn, "cholesky": dk**3 / 3})


def matmul_peak(cfg, sizes=(1024, 2048)):
    mm = jax.jit(jnp.matmul)
    out = {}
    for n in sizes:
        ka, kb = jax.random.split(jax.random.key(n))
        a = jax.random.normal(ka, (n, n), dtype=jnp.float64)
        b = jax.random.normal(kb, (n, n), dtype=jnp.float64)
        _, tm = bench(mm, a, b, cfg=cfg)
        tm["gflops"] = 2 * n**3 / tm["median_s"] / 1e9
        out[str(n)] = tm
        del a, b
    best = max(v["gflops"] for v in out.values())
    return out, best


def contention(entry):
    """Max over ℓ/∇ℓ/∇²ℓ of the cores other processes used while they were timed."""
    vals = [entry[k].get("other_processes_cores") for k in ("nll", "grad", "hessian")]
    vals = [v for v in vals if v is not None]
    return f"{max(vals):.2f}" if vals else "n/a"


def rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def ms(s):
    return f"{1e3 * s:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="few repeats (smoke run)")
    ap.add_argument("--name", default="likelihood",
                    help="results file stem under benchmarks/results/ (default: likelihood)")
    args = ap.parse_args()
    if args.quick:
        cfg = {"min_reps": 2, "min_time": 0.0, "max_time": 2.0, "floor_reps": 1}
        naive_cfg = cfg
    else:
        cfg = {"min_reps": 7, "min_time": 1.0, "max_time": 10.0, "floor_reps": 5}
        # the naive Hessians take seconds per call: keep ≥ 3 repeats within budget
        naive_cfg = {"min_reps": 5, "min_time": 1.0, "max_time": 12.0, "floor_reps": 3}
    t_start = time.perf_counter()
    cpu_start = cpu_busy_seconds()
    info = machine_info()
    print(f"wendyjax likelihood benchmark  ({'quick' if args.quick else 'full'} run)")
    print(f"  {info.get('cpu_model', info['processor'])}, {info['cpu_count']} CPUs, "
          f"jax {info['jax']}, devices {info['devices']}")
    idle_check(info)

    # --- matmul peak (measured again at the end; the best of both is the peak)
    mm_times, peak = matmul_peak(cfg)
    for n, v in mm_times.items():
        print(f"  float64 matmul n={n}: {ms(v['median_s'])} ms  → {v['gflops']:.1f} GFLOP/s")
    print(f"  float64 matmul best at start: {peak:.1f} GFLOP/s\n")

    tf_cfg = wj.TestFunctionConfig(min_info=1.0, k_max=200)
    setups = [
        ("lorenz", wj.models.lorenz, "gaussian", [("default (LiP)", None), ("general", False)]),
        ("goodwin_3d", wj.models.goodwin_3d, "lognormal", [("default (general)", None)]),
    ]
    cases = []
    naive_res = {}
    for mname, factory, noise, paths in setups:
        benchm = factory()
        t0 = time.perf_counter()
        data = benchm.simulate(jax.random.key(0))
        sim_s = time.perf_counter() - t0
        p = jnp.asarray(benchm.p_true, dtype=jnp.float64)
        liks = {}
        for pname, linear in paths:
            t0 = time.perf_counter()
            lik = wj.weak_likelihood(benchm.model, data, noise, test_functions=tf_cfg, linear=linear)
            jax.block_until_ready(lik)
            build_s = time.perf_counter() - t0
            R, K, N = lik.problem.phi.shape
            D = lik.problem.n_states
            J = benchm.model.n_params
            k_real = int(np.sum(np.asarray(lik.problem.kmask[0])))
            print(f"{mname} [{pname}]: phi {tuple(lik.problem.phi.shape)}  K = {K} "
                  f"(real {k_real}), N = {N}, D = {D}, J = {J}, "
                  f"linear = {lik.linear is not None}, build {build_s:.2f} s")
            val, t_nll = bench(wj.weak.nll, lik, p, cfg=cfg)
            grad, t_grad = bench(wj.weak.nll_grad, lik, p, cfg=cfg)
            hess, t_hess = bench(wj.weak.nll_hessian, lik, p, cfg=cfg)
            case = {
                "model": mname, "path": pname, "noise": noise, "linear": lik.linear is not None,
                "K": K, "K_real": k_real, "N": N, "D": D, "J": J, "R": R,
                "simulate_s": sim_s, "build_s": build_s,
                "nll": t_nll, "grad": t_grad, "hessian": t_hess,
                "nll_value": float(val),
                "grad_over_nll": t_grad["median_s"] / t_nll["median_s"],
                "hess_over_nll": t_hess["median_s"] / t_nll["median_s"],
            }
            if lik.linear is None:
                fl = nip_flops(K, N, D)
                ad, t_ad = bench(autodiff_hessian, lik, p, cfg=cfg)
                case["autodiff_hessian"] = t_ad
                case["hess_speedup_vs_autodiff"] = t_ad["median_s"] / t_hess["median_s"]
                case["autodiff_hessian_rel"] = rel(hess, ad)
            else:
                fl = lip_flops(K, D, J)
            case["flops"] = fl
            case["gflops_nll"] = fl["total"] / t_nll["median_s"] / 1e9
            liks[pname] = (lik, val, grad, hess)
            cases.append(case)

        # --- naive reference on trajectory 0 of the first path's problem
        lik0, val0, grad0, hess0 = liks[paths[0][0]]
        rhs = log_space_rhs(benchm.model.rhs) if lik0.problem.log_space else benchm.model.rhs
        naive = make_naive(rhs)
        nargs = naive_args(lik0, p)
        K = nargs[1].shape[0]
        N, D = nargs[3].shape
        print(f"{mname} [naive dense]: L is {D * K} × {D * N}")
        r_naive = naive["residual"](nargs[3], p, nargs[1], nargs[2], nargs[4])
        r_lib = wj.weak.residual(lik0, p)[0]
        mask_dk = np.tile(np.asarray(lik0.problem.kmask[0]) > 0, D)
        nv, t_nnll = bench(naive["nll"], *nargs, cfg=naive_cfg)
        ng, t_ngrad = bench(naive["grad"], *nargs, cfg=naive_cfg)
        nh, t_nhess = bench(naive["hessian"], *nargs, cfg=naive_cfg)
        agree = {
            "residual_rel": rel(r_naive, np.asarray(r_lib)[mask_dk]),
            "nll_rel": abs(float(nv) - float(val0)) / abs(float(val0)),
            "grad_rel": rel(ng, grad0),
            "hessian_rel": rel(nh, hess0),
        }
        for pname, (_, val, _, _) in liks.items():
            agree[f"nll_rel[{pname}]"] = abs(float(nv) - float(val)) / abs(float(val))
        fl = naive_flops(K, N, D)
        naive_res[mname] = {
            "nll": t_nnll, "grad": t_ngrad, "hessian": t_nhess, "nll_value": float(nv),
            "K": K, "N": N, "D": D, "agreement": agree, "flops": fl,
            "gflops_nll": fl["total"] / t_nnll["median_s"] / 1e9,
            "grad_over_nll": t_ngrad["median_s"] / t_nnll["median_s"],
            "compared_with_path": paths[0][0],
        }
        ok = agree["nll_rel"] < 1e-9
        print(f"  naive ℓ = {float(nv):.12g}, library ℓ = {float(val0):.12g}, rel. diff "
              f"{agree['nll_rel']:.2e} ({'OK' if ok else 'DISAGREE'} at 1e-9); residual "
              f"{agree['residual_rel']:.1e}, ∇ℓ {agree['grad_rel']:.1e}, ∇²ℓ {agree['hessian_rel']:.1e}")
        if len(liks) > 1:
            (_, va, ga, ha), (_, vb, gb, hb) = list(liks.values())[:2]
            naive_res[mname]["paths_agreement"] = {
                "nll_rel": abs(float(va) - float(vb)) / abs(float(vb)),
                "grad_rel": rel(ga, gb), "hessian_rel": rel(ha, hb),
            }
            pa = naive_res[mname]["paths_agreement"]
            print(f"  LiP vs general path: ℓ {pa['nll_rel']:.1e}, ∇ℓ {pa['grad_rel']:.1e}, "
                  f"∇²ℓ {pa['hessian_rel']:.1e}")
        print()
        del naive, nargs

    # --- matmul peak again, now that the machine is warm
    mm_end, peak_end = matmul_peak(cfg)
    for n, v in mm_end.items():
        print(f"  float64 matmul n={n} (end): {ms(v['median_s'])} ms  → {v['gflops']:.1f} GFLOP/s")
    mm_times = {"start": mm_times, "end": mm_end}
    peak = max(peak, peak_end)
    print(f"  float64 matmul peak (best of start and end): {peak:.1f} GFLOP/s\n")
    for c in cases:
        c["peak_fraction_nll"] = c["gflops_nll"] / peak

    # --- timing table
    header = ["model", "path", "K", "ℓ ms", "∇ℓ ms", "∇²ℓ ms", "∇ℓ/ℓ", "∇²ℓ/ℓ",
              "GFLOP/s ℓ", "compile ℓ/∇ℓ/∇²ℓ s", "reps", "others' cores"]
    rows = []
    for c in cases:
        rows.append([c["model"], c["path"], c["K"], ms(c["nll"]["median_s"]),
                     ms(c["grad"]["median_s"]), ms(c["hessian"]["median_s"]),
                     f"{c['grad_over_nll']:.2f}", f"{c['hess_over_nll']:.2f}",
                     f"{c['gflops_nll']:.1f}",
                     "/".join(f"{c[k]['compile_s']:.2f}" for k in ("nll", "grad", "hessian")),
                     "/".join(str(c[k]["repeats"]) for k in ("nll", "grad", "hessian")),
                     contention(c)])
    for mname, nr in naive_res.items():
        rows.append([mname, "naive dense", nr["K"], ms(nr["nll"]["median_s"]),
                     ms(nr["grad"]["median_s"]), ms(nr["hessian"]["median_s"]),
                     f"{nr['grad_over_nll']:.2f}",
                     f"{nr['hessian']['median_s'] / nr['nll']['median_s']:.2f}",
                     f"{nr['gflops_nll']:.1f}",
                     "/".join(f"{nr[k]['compile_s']:.2f}" for k in ("nll", "grad", "hessian")),
                     "/".join(str(nr[k]["repeats"]) for k in ("nll", "grad", "hessian")),
                     contention(nr)])
    aheader = ["general path", "∇²ℓ ms", "autodiff ∇²ℓ ms", "speed-up", "max rel. diff"]
    arows = [[f"{c['model']} [{c['path']}]", ms(c["hessian"]["median_s"]),
              ms(c["autodiff_hessian"]["median_s"]), f"{c['hess_speedup_vs_autodiff']:.2f}x",
              f"{c['autodiff_hessian_rel']:.1e}"] for c in cases if "autodiff_hessian" in c]

    # --- targets
    lor_lip = next(c for c in cases if c["model"] == "lorenz" and c["linear"])
    gw = next(c for c in cases if c["model"] == "goodwin_3d")
    speedup = naive_res["lorenz"]["hessian"]["median_s"] / lor_lip["hessian"]["median_s"]
    targets = [{
        "name": "LiP Hessian speed-up vs naive jax.hessian (Lorenz, default path)",
        "value": speedup, "target": f">= {TARGETS['lip_hessian_speedup']:.0f}x",
        "met": speedup >= TARGETS["lip_hessian_speedup"], "shown": f"{speedup:.1f}x",
    }, {
        "name": "NiP ℓ fraction of float64 matmul peak (Goodwin-3D)",
        "value": gw["peak_fraction_nll"],
        "target": f">= {100 * TARGETS['nip_peak_fraction']:.0f}% of {peak:.1f} GFLOP/s",
        "met": gw["peak_fraction_nll"] >= TARGETS["nip_peak_fraction"],
        "shown": f"{100 * gw['peak_fraction_nll']:.1f}% ({gw['gflops_nll']:.1f} GFLOP/s)",
    }]
    for c in cases:
        targets.append({
            "name": f"∇ℓ cost / ℓ cost ({c['model']}, {c['path']})",
            "value": c["grad_over_nll"], "target": f"<= {TARGETS['grad_over_nll']:.0f}",
            "met": c["grad_over_nll"] <= TARGETS["grad_over_nll"],
            "shown": f"{c['grad_over_nll']:.2f}",
        })
    trows = [[t["name"], t["shown"], t["target"], "PASS" if t["met"] else "MISS"] for t in targets]

    # --- flop breakdown of the NiP likelihood
    frows = []
    for c in cases:
        if c["linear"]:
            continue
        f = c["flops"]
        frows.append([f"{c['model']} [{c['path']}]", f"{f['gram_phi_phi'] / 1e9:.3f}",
                      f"{f['gram_dphi_phi'] / 1e9:.3f}", f"{f['cholesky'] / 1e9:.3f}",
                      f"{f['total'] / 1e9:.3f}", ms(c["nll"]["median_s"]),
                      f"{c['gflops_nll']:.1f}", f"{100 * c['peak_fraction_nll']:.1f}%"])
    fheader = ["general-path ℓ", "Φ-Φ GF", "Φ̇-Φ GF", "chol GF", "total GF", "ℓ ms",
               "GFLOP/s", "of peak"]
    total_s = time.perf_counter() - t_start
    if hasattr(os, "getloadavg"):
        info["loadavg_at_end"] = os.getloadavg()
    other = other_cpu_load(cpu_start, cpu_busy_seconds(), total_s)
    info["other_processes_mean_cores"] = other
    if other is not None:
        print(f"CPU used by other processes during the run: {other:.2f} cores on average"
              + (" — WARNING: timings are contended" if other > 0.1 else ""))
    print(f"\ntotal benchmark time {total_s:.1f} s")

    # --- write results
    result = {"script": "benchmarks/likelihood.py", "date": utc_now(), "quick": args.quick,
              "repeat_config": {"library": cfg, "naive": naive_cfg}, "machine": info,
              "matmul_float64": {"sizes": mm_times, "peak_gflops": peak},
              "test_functions": {"min_info": 1.0, "k_max": 200}, "cases": cases, "naive": naive_res,
              "targets": targets, "total_time_s": total_s}
    paths = write_results(args.name, result, indent=2, default=float)  # the data first
    agreement = [[m, *(f"{nr['agreement'][k]:.1e}" for k in ("nll_rel", "residual_rel", "grad_rel", "hessian_rel"))]
                 for m, nr in naive_res.items()]
    md = [
        "# Weak likelihood benchmark", "",
        f"Generated by `{' '.join(x for x in (env_prefix(), command()) if x)}` on {result['date']}.", "",
        f"Machine: {info.get('cpu_model', info['processor'])}, {info['cpu_count']} CPUs, "
        f"{info['uname']['system']} {info['uname']['release']} ({info['uname']['machine']}), "
        f"jax {info['jax']}, devices {', '.join(info['devices'])}; float64.",
        f"float64 matmul peak: **{peak:.1f} GFLOP/s** ("
        + "; ".join(f"{when}: " + ", ".join(f"n={n}: {v['gflops']:.1f}" for n, v in d.items())
                    for when, d in mm_times.items()) + ").",
        "" if other is None else f"Other processes used {other:.2f} cores on average during the run"
        + (" (timings contended)." if other > 0.1 else "."), "",
        "Medians after compilation; compile = first call − median. Naive = dense "
        "L = ∂r/∂vec(U) by `jax.jacfwd`, S = LΣLᵀ, `jax.grad`/`jax.hessian`. GFLOP/s ℓ is an "
        "analytic flop count (general path: two Gram families + Cholesky; LiP: Σ_q c_q Ŝ_q + "
        "Cholesky; naive: jacfwd products + LΣLᵀ + Cholesky) over the median time. "
        "'others' cores': CPU used by other processes while that row was timed.", "",
        *markdown_table(header, rows), "",
        "## General-path ∇²ℓ vs the forward-over-reverse autodiff it replaced", "",
        *markdown_table(aheader, arows), "",
        "## Agreement of the naive reference with the library", "",
        *markdown_table(["model", "ℓ rel", "residual rel", "∇ℓ rel", "∇²ℓ rel"], agreement), "",
        "## Targets", "", *markdown_table(["target", "measured", "required", "result"], trows), "",
        "## Flops of the general-path ℓ", "", *markdown_table(fheader, frows), "",
    ]
    paths += write_results(args.name, markdown=md)
    print("\n".join(md))
    print(f"wrote {' and '.join(map(str, paths))}")


if __name__ == "__main__":
    main()
