r"""The Bayesian / stochastic competitors of Carey & Ramsay 2021 §5: simulated annealing (SA, §2.2) and
smooth functional tempering (SFT, §2.4, Campbell & Steele 2012), on model (14)
$D^2x = \beta_0x + \beta_1Dx + \alpha u$ from rest, $u$ the unit pulse on [14, 15).

Both run vmapped over replicates with `lax.scan` over iterations. The paper leaves most of
their settings unstated (seed002 digest §3.2); the choices made here are listed in each
function's docstring and in `benchmarks/data2ld_simulation.py`'s report.
"""

import jax
import jax.numpy as jnp
import numpy as np

from wendyjax import linear as L

IMPACT = (14.0, 15.0)
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(12)


def _expm_companion(theta, s):
    r"""$e^{As}$ for $A = \begin{pmatrix}0 & 1\\ \beta_0 & \beta_1\end{pmatrix}$ at the times `s`
    (any shape, ≥ 0), by Cayley–Hamilton: $e^{As} = e^{\tau s}[C\,I + S\,(A - \tau I)]$ with
    $\tau = \beta_1/2$, $q = \tau^2 + \beta_0$, $C = \cosh(\sqrt q s)$ and
    $S = \sinh(\sqrt q s)/\sqrt q$ (cos / sin for $q < 0$, series near $q = 0$). Shape `s.shape + (2, 2)`."""
    beta0, beta1 = theta[0], theta[1]
    tau = beta1 / 2
    q = tau**2 + beta0
    r = jnp.sqrt(jnp.abs(q))
    safe_r = jnp.where(r > 1e-8, r, 1.0)
    rs = safe_r * s
    C = jnp.where(q > 0, jnp.cosh(rs), jnp.cos(rs))
    S = jnp.where(q > 0, jnp.sinh(rs), jnp.sin(rs)) / safe_r
    small = r <= 1e-8
    C = jnp.where(small, 1 + q * s**2 / 2, C)
    S = jnp.where(small, s + q * s**3 / 6, S)
    A_tau = jnp.array([[-tau, 1.0], [beta0, beta1 - tau]])
    return jnp.exp(tau * s)[..., None, None] * (C[..., None, None] * jnp.eye(2) + S[..., None, None] * A_tau)


def pulse_response(theta, t: np.ndarray):
    r"""$x(t)$ of model (14) from rest for any θ (no damping condition) at the sample times
    `t` (NumPy: which of them fall on the pulse is static): zero before 14,
    $z(14 + s) = \int_0^s e^{A\sigma} b\,d\sigma$ on the pulse (12-point Gauss–Legendre:
    the integrand is entire), $z(t) = e^{A(t-15)}z(15)$ after it; $b = (0, \alpha)$."""
    t = np.asarray(t)
    b = jnp.array([0.0, 1.0]) * theta[2]

    def forced(s):  # z(14 + s) for 0 ≤ s ≤ 1
        u = 0.5 * s * (jnp.asarray(_GL_NODES) + 1.0)
        return 0.5 * s * jnp.einsum("q,qij,j->i", jnp.asarray(_GL_WEIGHTS), _expm_companion(theta, u), b)

    z15 = forced(1.0)
    on = (t >= IMPACT[0]) & (t < IMPACT[1])
    x = jnp.zeros(t.shape, dtype=b.dtype)
    if on.any():
        x = x.at[on].set(jax.vmap(forced)(jnp.asarray(t[on] - IMPACT[0]))[:, 0])
    after = t >= IMPACT[1]
    decay = _expm_companion(theta, jnp.asarray(t[after] - IMPACT[1]))
    return x.at[after].set(jnp.einsum("nij,j->ni", decay, z15)[:, 0])


def simulated_annealing(key, t, y, theta0, noise_var, n_iter: int, t0: float = 100.0, accept_target: float = 0.44):
    r"""Simulated annealing (Carey & Ramsay 2021 §2.2) for one data set: the state θ, energy
    $E(\theta) = \mathrm{SSE}(\theta)/2s^2$ (eq. 4's exponent in units of `noise_var` $= s^2$,
    a θ-free noise variance, so that temperature 1 is the Gaussian likelihood), Boltzmann
    schedule $T_k = T_0/\log(k + 1)$ with $T_0 = 100$ (as the paper, following MATLAB's
    `temperatureboltz`), Barker acceptance $1/(1 + e^{\Delta E/T_k})$ of a worse point and
    always of a better one (the paper prints the rule on π; on the energy it is MATLAB's
    `acceptancesa`). Choices made (unstated in Carey & Ramsay 2021): one coordinate at a time in turn, a
    Gaussian step whose scale per coordinate adapts to an acceptance rate of 0.44
    (Roberts & Rosenthal's Metropolis-within-Gibbs rule), starting at 0.1 max(|θ₀ⱼ|, 0.1);
    the initial state fixed at rest (as the truth); the estimate is the best point visited.
    Returns (θ̂, its SSE, the acceptance rate)."""

    def sse(theta):
        r = y - pulse_response(theta, t)
        return jnp.where(jnp.all(jnp.isfinite(r)), r @ r, jnp.inf)

    def energy(s):
        return 0.5 * s / noise_var

    def step(carry, k):
        theta, s, log_scale, best, best_s, n_acc, key = carry
        key, k_prop, k_acc = jax.random.split(key, 3)
        j = k % theta.size
        temp = t0 / jnp.log(k + 2.0)
        proposal = theta.at[j].add(jnp.exp(log_scale[j]) * jax.random.normal(k_prop))
        s_new = sse(proposal)
        delta = energy(s_new) - energy(s)
        accept = jnp.isfinite(s_new) & ((delta <= 0) | (jax.random.uniform(k_acc) < jax.nn.sigmoid(-delta / temp)))
        gain = jnp.minimum(0.1, 1.0 / jnp.sqrt(k // theta.size + 1.0))
        log_scale = log_scale.at[j].add(gain * (accept - accept_target))
        theta = jnp.where(accept, proposal, theta)
        s = jnp.where(accept, s_new, s)
        better = s < best_s
        return (theta, s, log_scale, jnp.where(better, theta, best), jnp.where(better, s, best_s),
                n_acc + accept, key), None

    s0 = sse(theta0)
    log_scale = jnp.log(0.1 * jnp.maximum(jnp.abs(theta0), 0.1))
    init = (theta0, s0, log_scale, theta0, s0, jnp.array(0), key)
    (_, _, _, best, best_s, n_acc, _), _ = jax.lax.scan(step, init, jnp.arange(n_iter))
    return best, best_s, n_acc / n_iter


def _penalty_form(problem, c):
    r"""$L(\theta, c) = v^T M(c) v$ with $v = (\kappa, \lambda) = v_0 + E\theta$ the affine
    coefficient maps of the problem and $M(c) = \begin{pmatrix}c^TG_{ab}c & F_{af}^Tc\\ \cdot & F\end{pmatrix}$:
    returns $(M, v_0, E)$ (the penalty is quadratic in θ for fixed c)."""
    Gc = jnp.einsum("k,abkl,l->ab", c, problem.gram, c)
    Cc = jnp.einsum("afk,k->af", problem.cross, c)
    M = jnp.block([[Gc, Cc], [Cc.T, problem.forcing_gram]])
    v0 = jnp.concatenate([problem.kappa0, problem.lam0])
    E = jnp.concatenate([problem.kappa_theta, problem.lam_theta])
    return M, v0, E


def _penalty(problem, theta, c):
    M, v0, E = _penalty_form(problem, c)
    v = v0 + E @ theta
    return v @ M @ v


def smooth_functional_tempering(key, problem, y, theta0, lambdas, n_iter: int, burn_in: int,
                                swap_prob: float = 0.5):
    r"""Smooth functional tempering (Carey & Ramsay 2021 §2.4, eq. 7) for one data set: chain $m$ samples
    $\pi_m(c, \theta, \sigma^2) \propto \sigma^{-N}e^{-\|y - \Phi c\|^2/2\sigma^2}
    e^{-\lambda_m L(\theta, c)/2}\,N(\theta; 0, I)\,\sigma^{-2}$ (the paper's priors and
    unnormalised smoothing "prior"; $L$ the squared $L^2$ norm of the ODE residual on
    [0, 60]). Each iteration every chain draws from its exact full conditionals (Gibbs:
    $c$ Gaussian, θ Gaussian as $L$ is quadratic in θ for fixed $c$, σ² inverse gamma;
    choice made: the paper says "an MH step", Gibbs is the MH step with acceptance 1), then
    with probability `swap_prob` a random neighbouring pair proposes to swap states,
    accepted with probability $\min(1, e^{(\lambda_m - \lambda_{m+1})(L_m - L_{m+1})/2})$.
    All chains start at θ₀, the least-squares spline coefficients and their residual
    variance. The estimate is the posterior mean of θ in the chain with the largest λ after
    `burn_in` iterations, the 95 % interval its 2.5 / 97.5 % quantiles, x̂ = Φ × the
    posterior mean of c. Returns (θ̂, lower, upper, mean c, swap acceptance rate)."""
    lambdas = jnp.asarray(lambdas)
    n_chains = lambdas.shape[0]
    phi = problem.phi
    N = y.shape[0]
    gram = phi.T @ phi
    phiy = phi.T @ y
    K = phi.shape[1]
    c_ls = jnp.linalg.solve(gram + 1e-10 * jnp.trace(gram) / K * jnp.eye(K), phiy)
    s2_ls = jnp.sum((y - phi @ c_ls) ** 2) / (N - K)

    def draw_c(key, theta, s2, lam):
        R, S, _ = L.penalty_matrices(problem, theta)
        Q = gram / s2 + lam * R
        chol = jnp.linalg.cholesky(Q)
        mean = jax.scipy.linalg.cho_solve((chol, True), phiy / s2 - lam * S)
        z = jax.random.normal(key, (K,))
        return mean + jax.scipy.linalg.solve_triangular(chol.T, z, lower=False)

    def draw_theta(key, c, lam):
        M, v0, E = _penalty_form(problem, c)
        P = lam * E.T @ M @ E + jnp.eye(theta0.size)
        chol = jnp.linalg.cholesky(P)
        mean = jax.scipy.linalg.cho_solve((chol, True), -lam * E.T @ M @ v0)
        z = jax.random.normal(key, (theta0.size,))
        return mean + jax.scipy.linalg.solve_triangular(chol.T, z, lower=False)

    def draw_s2(key, c):
        sse = jnp.sum((y - phi @ c) ** 2)
        return 0.5 * sse / jax.random.gamma(key, 0.5 * N)

    def gibbs(key, state, lam):
        c, theta, s2 = state
        k1, k2, k3 = jax.random.split(key, 3)
        c = draw_c(k1, theta, s2, lam)
        theta = draw_theta(k2, c, lam)
        return c, theta, draw_s2(k3, c)

    def step(carry, k):
        states, n_swap, n_tried, sums, key = carry
        key, k_gibbs, k_do, k_pair, k_acc = jax.random.split(key, 5)
        states = jax.vmap(gibbs)(jax.random.split(k_gibbs, n_chains), states, lambdas)
        c, theta, _ = states
        pen = jax.vmap(lambda th, cc: _penalty(problem, th, cc))(theta, c)
        m = jax.random.randint(k_pair, (), 0, n_chains - 1)
        log_r = 0.5 * (lambdas[m] - lambdas[m + 1]) * (pen[m] - pen[m + 1])
        tried = jax.random.uniform(k_do) < swap_prob
        swap = tried & (jnp.log(jax.random.uniform(k_acc)) < log_r)
        order = jnp.arange(n_chains)
        order = jnp.where(swap, order.at[m].set(m + 1).at[m + 1].set(m), order)
        states = jax.tree.map(lambda a: a[order], states)
        keep = k >= burn_in
        sums = sums + jnp.where(keep, states[0][-1], 0.0)
        return (states, n_swap + swap, n_tried + tried, sums, key), jnp.where(keep, states[1][-1], jnp.nan)

    states = (jnp.tile(c_ls, (n_chains, 1)), jnp.tile(theta0, (n_chains, 1)), jnp.full(n_chains, s2_ls))
    init = (states, jnp.array(0), jnp.array(0), jnp.zeros(K), key)
    (_, n_swap, n_tried, sums, _), thetas = jax.lax.scan(step, init, jnp.arange(n_iter))
    kept = thetas[burn_in:]
    lower, upper = jnp.quantile(kept, jnp.array([0.025, 0.975]), axis=0)
    return jnp.mean(kept, axis=0), lower, upper, sums / (n_iter - burn_in), n_swap / jnp.maximum(n_tried, 1)
