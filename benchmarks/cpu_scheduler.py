"""XLA:CPU's concurrency-optimised scheduler and vmapped fits: the evidence behind the README's
"XLA:CPU deadlock workaround" (`wj.CPU_COMPILER_OPTIONS`).

Run from the repository root::

    python benchmarks/cpu_scheduler.py     # ~7 minutes on 2 idle CPU cores

The program: 16 stacked WENDy likelihoods of the logistic benchmark (`wj.models.logistic()`,
data keys 0–15, default noise) solved at once by a vmapped `wj.MLE().solve` — a
`lax.while_loop` whose body holds a batched Cholesky — compiled by `jax.jit` in float64 and
called over and over. Each setting runs in a fresh subprocess (this script re-invoked with
`--worker`), because XLA_FLAGS is read only when JAX's CPU backend starts:

- `a`: `XLA_FLAGS=--xla_cpu_enable_concurrency_optimized_scheduler=true`, plain `jax.jit`;
- `b`: the same XLA_FLAGS, `jax.jit(..., compiler_options=wj.CPU_COMPILER_OPTIONS)`
  (XLA's memory-optimised scheduler for this one program);
- `c`: XLA_FLAGS unset, plain `jax.jit` (this jaxlib's default).

A worker sets up the data, compiles ahead of time (`.lower(...).compile()`), then calls the
compiled program until `--seconds` have passed, reporting every completed call. The parent
declares a hang when no call completes within `--watchdog` seconds of the previous one (or of
the end of compilation) while the worker idles (at most `--idle-cores` cores over
`--idle-window` s: a deadlocked XLA:CPU waits on futexes; a worker that is merely slow because
other processes share the CPU gets more time, up to `--max-call` s a call), and kills it.
Every setting runs `--repeats` times, the settings interleaved. The estimates of each
worker's first call are saved; those of `a` and `b` (first repeats) must be identical: the
scheduler changes the order of the work, not the arithmetic. A worker also reports a hash of
its compiled (scheduled) HLO module: `a` and `c` compile to the same schedule, `b` to another.

Writes `benchmarks/results/cpu_scheduler.{json,md}`.
"""

import argparse
import hashlib
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from _common import command, machine_info, machine_line, markdown_table, utc_now, write_results

import wendyjax as wj

CONCURRENCY_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler=true"

# key: (description, XLA_FLAGS of the worker (None: unset), pass wj.CPU_COMPILER_OPTIONS to jit)
SETTINGS = {
    "a": ("concurrency-optimised scheduler (XLA_FLAGS), plain jax.jit", CONCURRENCY_FLAG, False),
    "b": ("concurrency-optimised scheduler (XLA_FLAGS), jax.jit(compiler_options=wj.CPU_COMPILER_OPTIONS)",
          CONCURRENCY_FLAG, True),
    "c": ("XLA_FLAGS unset, plain jax.jit", None, False),
}


# ----------------------------------------------------------------------------- worker


def _emit(event: str, **fields) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def worker(setting: str, seconds: float, batch: int, params_out: str | None) -> None:
    """Set up, compile, and call the batched solve until `seconds` have passed (in this process)."""
    _, _, scoped = SETTINGS[setting]
    t0 = time.perf_counter()
    bench = wj.models.logistic()
    lik = wj.weak.stack_likelihoods([wj.weak_likelihood(bench.model, bench.simulate(jax.random.key(i)))
                                     for i in range(batch)])
    lo, hi = (jnp.asarray(b, float) for b in bench.model.bounds)
    p0 = jnp.tile(jnp.array([0.5, -0.5]), (batch, 1)) + 0.1 * jax.random.uniform(jax.random.key(99), (batch, 2))
    jax.block_until_ready((lik, p0))
    _emit("setup", seconds=time.perf_counter() - t0, xla_flags=os.environ.get("XLA_FLAGS"),
          x64=bool(jax.config.jax_enable_x64), dtype=str(p0.dtype))

    t0 = time.perf_counter()
    solve = jax.vmap(lambda lk, p: wj.MLE().solve(lk, p, lo, hi))
    fn = jax.jit(solve, compiler_options=wj.CPU_COMPILER_OPTIONS if scoped else None)
    compiled = fn.lower(lik, p0).compile()
    schedule = hashlib.sha256(compiled.as_text().encode()).hexdigest()[:12]  # the scheduled HLO module
    _emit("compiled", seconds=time.perf_counter() - t0, schedule=schedule)

    start = time.perf_counter()
    calls = 0
    while calls == 0 or time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        sol = jax.block_until_ready(compiled(lik, p0))
        calls += 1
        if calls == 1 and params_out:
            np.savez(params_out, params=np.asarray(sol.params), num_steps=np.asarray(sol.num_steps))
        _emit("call", n=calls, seconds=time.perf_counter() - t0)
    _emit("done", calls=calls)


# ----------------------------------------------------------------------------- parent


def _reader(stream, q):
    for line in stream:
        q.put((time.perf_counter(), line))
    q.put((time.perf_counter(), None))


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process `pid` (all its threads) from /proc, or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cores_used(pid: int, window: float) -> float | None:
    """How many cores process `pid` uses over the next `window` seconds."""
    c0 = _cpu_seconds(pid)
    time.sleep(window)
    c1 = _cpu_seconds(pid)
    return None if c0 is None or c1 is None else (c1 - c0) / window


def run_worker(setting: str, repeat: int, args, workdir: Path) -> dict:
    """One worker subprocess under the watchdog: what it completed and whether it hung."""
    _, flags, scoped = SETTINGS[setting]
    env = {**os.environ, "WENDYJAX_BENCHMARK_KEEP_XLA_FLAGS": "1"}  # _common.py: leave XLA_FLAGS alone
    env.pop("XLA_FLAGS", None)
    if flags is not None:
        env["XLA_FLAGS"] = flags
    params_out = workdir / f"params_{setting}_{repeat}.npz"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", setting, "--seconds", str(args.seconds),
           "--batch", str(args.batch), "--params-out", str(params_out)]
    errpath = workdir / f"stderr_{setting}_{repeat}.txt"
    row = {"setting": setting, "repeat": repeat, "xla_flags": flags, "compiler_options": scoped,
           "calls": 0, "hung": False, "hang_after_s": None, "detected_after_s": None,
           "setup_s": None, "compile_s": None, "schedule": None, "call_s": [], "busy_extensions": 0,
           "cores_at_detection": None, "status": "running"}
    t_start = time.perf_counter()
    with open(errpath, "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    q = queue.Queue()
    threading.Thread(target=_reader, args=(proc.stdout, q), daemon=True).start()

    deadline = t_start + args.startup_timeout
    calls_start = None
    last_done = None
    done = False
    while True:
        try:
            t, line = q.get(timeout=max(deadline - time.perf_counter(), 0.0))
        except queue.Empty:
            if done:  # finished its calls but does not exit
                proc.kill()
                break
            if calls_start is None:
                row["status"] = f"no compiled program within {args.startup_timeout:g} s (killed)"
                proc.kill()
                break
            # no call for `watchdog` s: a deadlocked worker idles (its threads wait on futexes), a
            # merely slow one (CPU shared with other processes) computes; give that one more time
            cores = _cores_used(proc.pid, args.idle_window)
            if not q.empty():
                continue
            now = time.perf_counter()
            if cores is not None and cores > args.idle_cores and now - last_done < args.max_call:
                row["busy_extensions"] += 1
                deadline = now + args.idle_window
                continue
            row["hung"] = True
            row["cores_at_detection"] = cores
            idle = cores is not None and cores <= args.idle_cores
            row["status"] = ("hung, idle (killed)" if idle
                             else f"no call within {args.max_call:g} s, still busy (killed)")
            row["hang_after_s"] = last_done - calls_start  # when the call that never finished began
            row["detected_after_s"] = now - calls_start
            proc.kill()
            break
        if line is None:  # the worker's stdout closed
            break
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue
        if ev["event"] == "setup":
            row["setup_s"] = ev["seconds"]
            row["worker_xla_flags"] = ev["xla_flags"]
            row["dtype"] = ev["dtype"]
        elif ev["event"] == "compiled":
            row["compile_s"] = ev["seconds"]
            row["schedule"] = ev["schedule"]
            calls_start = last_done = t
            deadline = t + args.watchdog
        elif ev["event"] == "call":
            row["calls"] = ev["n"]
            row["call_s"].append(ev["seconds"])
            last_done = t
            deadline = t + args.watchdog
        elif ev["event"] == "done":
            row["status"] = "ran its time"
            done = True
            deadline = t + args.watchdog  # time to exit
    try:
        rc = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
    row["returncode"] = rc
    if row["status"] == "running":
        row["status"] = f"exited early (rc {rc})"
    if calls_start is not None:
        row["calls_s"] = (last_done - calls_start)
    row["wall_s"] = time.perf_counter() - t_start
    if rc not in (0, -9) or row["status"].startswith(("no compiled", "exited")):
        row["stderr_tail"] = errpath.read_text()[-2000:]
    row["params_file"] = str(params_out) if params_out.exists() else None
    return row


def _load(path):
    return None if path is None else dict(np.load(path))


def compare(rows, ref="b", other="a"):
    """Are the first-call estimates of `other` and `ref` (first repeats that have one) identical?"""
    def first(setting):
        return next((r for r in rows if r["setting"] == setting and r["params_file"]), None)

    r_ref, r_other = first(ref), first(other)
    if r_ref is None or r_other is None:
        return {"settings": [other, ref], "compared": False,
                "reason": "no first call completed in one of the two settings"}
    a, b = _load(r_other["params_file"]), _load(r_ref["params_file"])
    return {"settings": [other, ref], "repeats": [r_other["repeat"], r_ref["repeat"]], "compared": True,
            "identical": bool(np.array_equal(a["params"], b["params"])
                              and np.array_equal(a["num_steps"], b["num_steps"])),
            "max_abs_diff": float(np.max(np.abs(a["params"] - b["params"]))),
            "params_first_3": b["params"][:3].tolist(), "num_steps": b["num_steps"].tolist()}


def main(args):
    total0 = time.perf_counter()
    info = machine_info()
    settings = list(dict.fromkeys(args.settings))
    rows = []
    with tempfile.TemporaryDirectory(prefix="cpu_scheduler_") as tmp:
        for repeat in range(1, args.repeats + 1):
            for s in settings:
                print(f"setting {s} repeat {repeat}: {SETTINGS[s][0]} ...", flush=True)
                row = run_worker(s, repeat, args, Path(tmp))
                rows.append(row)
                print(f"  {row['status']}: {row['calls']} calls"
                      + (f", hung after {row['hang_after_s']:.1f} s" if row["hung"] else "")
                      + f"; setup {row['setup_s'] or float('nan'):.1f} s, compile "
                        f"{row['compile_s'] or float('nan'):.1f} s, wall {row['wall_s']:.1f} s", flush=True)
        checks = [compare(rows, "b", "a")]
        if "c" in settings:
            checks.append(compare(rows, "b", "c"))
    for row in rows:
        row.pop("params_file")
    total = time.perf_counter() - total0
    summary = {k: {"repeats": sum(r["setting"] == k for r in rows),
                   "hung": sum(r["hung"] for r in rows if r["setting"] == k),
                   "calls": sum(r["calls"] for r in rows if r["setting"] == k),
                   "schedules": sorted({r["schedule"] for r in rows if r["setting"] == k and r["schedule"]})}
               for k in settings}

    out = {"command": command(), "date": utc_now(), "machine": info, "total_s": total,
           "settings": {k: {"description": SETTINGS[k][0], "xla_flags": SETTINGS[k][1],
                            "compiler_options": wj.CPU_COMPILER_OPTIONS if SETTINGS[k][2] else None}
                        for k in settings},
           "options": {k: v for k, v in vars(args).items() if k not in ("worker", "params_out")},
           "summary": summary, "rows": rows, "estimates": checks}
    write_results("cpu_scheduler", out, default=float)

    header = ["setting", "repeat", "calls completed", "hung", "seconds until the hang", "median call s",
              "setup s", "compile s", "schedule"]
    table = markdown_table(header, [
        [r["setting"], r["repeat"], r["calls"], "yes" if r["hung"] else "no",
         float(r["hang_after_s"]) if r["hung"] else "—",
         float(np.median(r["call_s"])) if r["call_s"] else "—",
         float(r["setup_s"]) if r["setup_s"] is not None else "—",
         float(r["compile_s"]) if r["compile_s"] is not None else "—", f"`{r['schedule']}`"] for r in rows])
    est = []
    for c in checks:
        x, y = c["settings"]
        if c["compared"]:
            est.append(f"- First-call estimates of `{x}` (repeat {c['repeats'][0]}) and `{y}` (repeat "
                       f"{c['repeats'][1]}): {'identical' if c['identical'] else 'DIFFERENT'} (parameters and "
                       f"step counts; max |Δp| = {c['max_abs_diff']:.3g}).")
        else:
            est.append(f"- First-call estimates of `{x}` and `{y}`: not compared ({c['reason']}).")
    md = ["# XLA:CPU scheduler and vmapped wendyjax fits", "",
          f"`{out['command']}` — {out['date']}, {machine_line(info)}; total {total / 60:.1f} min", "",
          f"{args.batch} stacked logistic likelihoods (`wj.models.logistic()`, keys 0–{args.batch - 1}), "
          "`jax.jit(jax.vmap(lambda l, p: wj.MLE().solve(l, p, lo, hi)))`, float64, compiled ahead of time and "
          f"called repeatedly for {args.seconds:g} s in a fresh subprocess per row. Hang: no call completed within "
          f"{args.watchdog:g} s while the worker uses at most {args.idle_cores:g} cores (over {args.idle_window:g} "
          "s; a busy worker gets more time, up to "
          f"{args.max_call:g} s a call); the worker is then killed. \"seconds until the hang\": from the end "
          "of compilation to the start of the call that never finished. \"schedule\": hash of the compiled "
          "(scheduled) HLO module.", "",
          *(f"- `{k}`: {SETTINGS[k][0]}" + (f"; `XLA_FLAGS={SETTINGS[k][1]}`" if SETTINGS[k][1] else "")
            for k in settings), "",
          *table, "",
          *(f"- `{k}`: hung in {v['hung']} of {v['repeats']} workers, {v['calls']} calls completed in all; "
            f"schedule {', '.join(f'`{h}`' for h in v['schedules']) or '—'}" for k, v in summary.items()),
          *est, ""]
    write_results("cpu_scheduler", markdown=md)
    print("\n".join(table))
    print("\n".join(md[-len(summary) - len(est) - 1:]))
    print(f"total {total:.0f} s")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=30.0, help="calling time per worker (default 30)")
    p.add_argument("--watchdog", type=float, default=30.0,
                   help="a hang: no completed call within this many seconds (default 30)")
    p.add_argument("--repeats", type=int, default=3, help="workers per setting (default 3)")
    p.add_argument("--settings", default="abc", help="which settings, e.g. 'ab' (default 'abc')")
    p.add_argument("--batch", type=int, default=16, help="stacked likelihoods (default 16)")
    p.add_argument("--idle-cores", type=float, default=0.05,
                   help="a stalled worker using at most this many cores is deadlocked (default 0.05)")
    p.add_argument("--idle-window", type=float, default=5.0, help="seconds to measure that over (default 5)")
    p.add_argument("--max-call", type=float, default=180.0,
                   help="seconds a busy worker may take for one call before it is killed (default 180)")
    p.add_argument("--startup-timeout", type=float, default=300.0,
                   help="seconds a worker may take to set up and compile (default 300)")
    p.add_argument("--worker", choices=sorted(SETTINGS), help=argparse.SUPPRESS)
    p.add_argument("--params-out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if not set(args.settings) <= set(SETTINGS):
        p.error(f"--settings: letters from {''.join(SETTINGS)}")
    return args


if __name__ == "__main__":
    a = parse_args()
    if a.worker:
        worker(a.worker, a.seconds, a.batch, a.params_out)
    else:
        main(a)
