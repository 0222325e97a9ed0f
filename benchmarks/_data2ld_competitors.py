r"""Simulated annealing (SA, §2.2) and smooth functional tempering (SFT, §2.4, Campbell & Steele 2012): Carey & Ramsay
2021 §5's competitors on model (14) for `data2ld_simulation.py`; the choices the paper leaves open in each docstring."""

import jax
import jax.numpy as jnp
import numpy as np

from wendyjax import linear as L

IMPACT = (14.0, 15.0)
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(12)


def _expm_companion(theta, s):
    r"""$e^{As}$, $A = ((0, 1), (\beta_0, \beta_1))$, at the times `s` ≥ 0 by Cayley–Hamilton: $e^{\tau s}[C\,I +
    S\,(A - \tau I)]$, $\tau = \beta_1/2$, $q = \tau^2 + \beta_0$, $C = \cosh(\sqrt q s)$,
    $S = \sinh(\sqrt q s)/\sqrt q$ (cos / sin for $q < 0$, series near 0). Shape `s.shape + (2, 2)`."""
    beta0, beta1 = theta[0], theta[1]
    tau = beta1 / 2
    q = tau**2 + beta0
    r = jnp.sqrt(jnp.abs(q))
    small, safe_r = r <= 1e-8, jnp.where(r <= 1e-8, 1.0, r)
    C = jnp.where(small, 1 + q * s**2 / 2, jnp.where(q > 0, jnp.cosh(safe_r * s), jnp.cos(safe_r * s)))
    S = jnp.where(small, s + q * s**3 / 6, jnp.where(q > 0, jnp.sinh(safe_r * s), jnp.sin(safe_r * s)) / safe_r)
    A_tau = jnp.array([[-tau, 1.0], [beta0, beta1 - tau]])
    return jnp.exp(tau * s)[..., None, None] * (C[..., None, None] * jnp.eye(2) + S[..., None, None] * A_tau)


def pulse_response(theta, t: np.ndarray):
    r"""$x(t)$ of model (14) from rest at the NumPy times `t`: zero before 14, $z(14 + s) = \int_0^s e^{A\sigma} b\,
    d\sigma$ on the pulse (12-point Gauss–Legendre: the integrand is entire), $z(t) = e^{A(t-15)}z(15)$ after it."""
    t = np.asarray(t)
    b = jnp.array([0.0, 1.0]) * theta[2]

    def forced(s):  # z(14 + s) for 0 ≤ s ≤ 1
        u = 0.5 * s * (jnp.asarray(_GL_NODES) + 1.0)
        return 0.5 * s * jnp.einsum("q,qij,j->i", jnp.asarray(_GL_WEIGHTS), _expm_companion(theta, u), b)

    on, after = (t >= IMPACT[0]) & (t < IMPACT[1]), t >= IMPACT[1]
    x = jnp.zeros(t.shape, dtype=b.dtype)
    if on.any():
        x = x.at[on].set(jax.vmap(forced)(jnp.asarray(t[on] - IMPACT[0]))[:, 0])
    decay = _expm_companion(theta, jnp.asarray(t[after] - IMPACT[1]))
    return x.at[after].set(jnp.einsum("nij,j->ni", decay, forced(1.0))[:, 0])


def simulated_annealing(key, t, y, theta0, noise_var, n_iter: int, t0: float = 100.0, accept_target: float = 0.44):
    r"""Simulated annealing (§2.2) for one data set: energy $\mathrm{SSE}(\theta)/2s^2$, $s^2$ = `noise_var`,
    Boltzmann schedule $T_k = T_0/\log(k + 1)$, $T_0 = 100$, Barker acceptance $1/(1 + e^{\Delta E/T_k})$ (MATLAB's
    `temperatureboltz` and `acceptancesa`, as the paper). Our choices: one coordinate at a time, a Gaussian step
    adapted to an acceptance rate of 0.44 from 0.1 max(|θ₀ⱼ|, 0.1), the best point visited.
    Returns (θ̂, its SSE, the acceptance rate)."""

    def sse(theta):
        r = y - pulse_response(theta, t)
        return jnp.where(jnp.all(jnp.isfinite(r)), r @ r, jnp.inf)

    def step(carry, k):
        theta, s, log_scale, best, best_s, n_acc, key = carry
        key, k_prop, k_acc = jax.random.split(key, 3)
        j = k % theta.size
        proposal = theta.at[j].add(jnp.exp(log_scale[j]) * jax.random.normal(k_prop))
        s_new = sse(proposal)
        delta = 0.5 * s_new / noise_var - 0.5 * s / noise_var
        temp = t0 / jnp.log(k + 2.0)
        accept = jnp.isfinite(s_new) & ((delta <= 0) | (jax.random.uniform(k_acc) < jax.nn.sigmoid(-delta / temp)))
        rate = jnp.minimum(0.1, 1.0 / jnp.sqrt(k // theta.size + 1.0))
        log_scale = log_scale.at[j].add(rate * (accept - accept_target))
        theta, s = jnp.where(accept, proposal, theta), jnp.where(accept, s_new, s)
        better = s < best_s
        best, best_s = jnp.where(better, theta, best), jnp.where(better, s, best_s)
        return (theta, s, log_scale, best, best_s, n_acc + accept, key), None

    s0 = sse(theta0)
    init = (theta0, s0, jnp.log(0.1 * jnp.maximum(jnp.abs(theta0), 0.1)), theta0, s0, jnp.array(0), key)
    (_, _, _, best, best_s, n_acc, _), _ = jax.lax.scan(step, init, jnp.arange(n_iter))
    return best, best_s, n_acc / n_iter


def _penalty_form(problem, c):
    r"""$(M, v_0, E)$ with the penalty $L(\theta, c) = v^TM(c)v$, $v = (\kappa, \lambda) = v_0 + E\theta$ (quadratic
    in θ for fixed c)."""
    Cc = jnp.einsum("afk,k->af", problem.cross, c)
    M = jnp.block([[jnp.einsum("k,abkl,l->ab", c, problem.gram, c), Cc], [Cc.T, problem.forcing_gram]])
    return M, jnp.concatenate([problem.kappa0, problem.lam0]), jnp.concatenate([problem.kappa_theta, problem.lam_theta])


def _penalty(problem, theta, c):
    M, v0, E = _penalty_form(problem, c)
    v = v0 + E @ theta
    return v @ M @ v


def _draw_gaussian(key, Q, b):
    """A draw from N(Q⁻¹b, Q⁻¹)."""
    chol = jnp.linalg.cholesky(Q)
    z = jax.random.normal(key, b.shape)
    return jax.scipy.linalg.cho_solve((chol, True), b) + jax.scipy.linalg.solve_triangular(chol.T, z, lower=False)


def smooth_functional_tempering(key, problem, y, theta0, lambdas, n_iter: int, burn_in: int, swap_prob: float = 0.5):
    r"""Smooth functional tempering (§2.4, eq. 7) for one data set: chain $m$ samples $\pi_m \propto \sigma^{-N}
    e^{-\|y - \Phi c\|^2/2\sigma^2} e^{-\lambda_m L(\theta, c)/2}\,N(\theta; 0, I)\,\sigma^{-2}$. Our choices: Gibbs
    steps from the exact full conditionals (the paper's "MH step" with acceptance 1), then with probability
    `swap_prob` a neighbouring pair proposes to swap; all chains start at θ₀ and the least-squares spline fit. The
    estimate: the posterior mean of θ in the chain of largest λ after `burn_in`, the interval its 2.5 / 97.5 %
    quantiles, x̂ = Φ × the mean c. Returns (θ̂, lower, upper, mean c, swap acceptance rate)."""
    lambdas = jnp.asarray(lambdas)
    n_chains = lambdas.shape[0]
    phi = problem.phi
    N, K = phi.shape
    gram, phiy = phi.T @ phi, phi.T @ y
    c_ls = jnp.linalg.solve(gram + 1e-10 * jnp.trace(gram) / K * jnp.eye(K), phiy)

    def gibbs(key, state, lam):
        c, theta, s2 = state
        k1, k2, k3 = jax.random.split(key, 3)
        R, S, _ = L.penalty_matrices(problem, theta)
        c = _draw_gaussian(k1, gram / s2 + lam * R, phiy / s2 - lam * S)
        M, v0, E = _penalty_form(problem, c)
        theta = _draw_gaussian(k2, lam * E.T @ M @ E + jnp.eye(theta0.size), -lam * E.T @ M @ v0)
        return c, theta, 0.5 * jnp.sum((y - phi @ c) ** 2) / jax.random.gamma(k3, 0.5 * N)

    def step(carry, k):
        states, n_swap, n_tried, sums, key = carry
        key, k_gibbs, k_do, k_pair, k_acc = jax.random.split(key, 5)
        states = jax.vmap(gibbs)(jax.random.split(k_gibbs, n_chains), states, lambdas)
        pen = jax.vmap(lambda th, cc: _penalty(problem, th, cc))(states[1], states[0])
        m = jax.random.randint(k_pair, (), 0, n_chains - 1)
        tried = jax.random.uniform(k_do) < swap_prob
        log_r = 0.5 * (lambdas[m] - lambdas[m + 1]) * (pen[m] - pen[m + 1])
        swap = tried & (jnp.log(jax.random.uniform(k_acc)) < log_r)
        order = jnp.arange(n_chains)
        states = jax.tree.map(lambda a: a[jnp.where(swap, order.at[m].set(m + 1).at[m + 1].set(m), order)], states)
        keep = k >= burn_in
        sums = sums + jnp.where(keep, states[0][-1], 0.0)
        return (states, n_swap + swap, n_tried + tried, sums, key), jnp.where(keep, states[1][-1], jnp.nan)

    s2_ls = jnp.sum((y - phi @ c_ls) ** 2) / (N - K)
    states = (jnp.tile(c_ls, (n_chains, 1)), jnp.tile(theta0, (n_chains, 1)), jnp.full(n_chains, s2_ls))
    init = (states, jnp.array(0), jnp.array(0), jnp.zeros(K), key)
    (_, n_swap, n_tried, sums, _), thetas = jax.lax.scan(step, init, jnp.arange(n_iter))
    kept = thetas[burn_in:]
    lower, upper = jnp.quantile(kept, jnp.array([0.025, 0.975]), axis=0)
    return jnp.mean(kept, axis=0), lower, upper, sums / (n_iter - burn_in), n_swap / jnp.maximum(n_tried, 1)
