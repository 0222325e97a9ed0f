r"""Linear ODE models with known forcing (Carey & Ramsay 2021, eq. 1), in the sign convention of the
Data2LD code (Carey & Ramsay 2021 digest §1):

$$D^{p_v} x_v(t) = \sum_{w,r} \beta_{v,w,r}(t\,|\,\theta)\, D^r x_w(t) + \sum_q \alpha_{v,q}(t\,|\,\theta)\, u_q(t),$$

one equation per variable $v$. A coefficient is a named unknown constant, a known number
or a time-varying expansion $\sum_m \theta_m \eta_m(t)$ in a basis; either way it is affine
in $\theta$, so the penalty $\int (L_\theta x)^2$ is quadratic in $\theta$ (Carey & Ramsay 2021, §3.1).
"""

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ..model import ODEModel


class Pulse(eqx.Module):
    """Known forcing $u(t)$ = `height` on `[start, stop)`, 0 elsewhere (Carey & Ramsay 2021, eq. 2: the
    blow to the head). Its `breaks` align the quadrature so $\\int u\\,\\cdot$ is exact."""

    start: float = eqx.field(static=True)
    stop: float = eqx.field(static=True)
    height: float = eqx.field(static=True, default=1.0)

    def __check_init__(self):
        if not self.start < self.stop:
            raise ValueError(f"Pulse: start must be < stop, got {self.start} and {self.stop}.")

    @property
    def breaks(self) -> tuple[float, float]:
        """`(start, stop)`: the jumps of the pulse, for quadrature and ODE steps."""
        return (self.start, self.stop)

    def __call__(self, t):
        t = jnp.asarray(t, dtype=float)
        return jnp.where((t >= self.start) & (t < self.stop), self.height, 0.0)


@dataclasses.dataclass(frozen=True)
class TimeVarying:
    r"""A coefficient $\sum_m \theta_{n_m}\eta_m(t)$: `basis(t)` returns $\eta_m(t)$ of shape
    `(len(t), M)` (e.g. a [`BSplineBasis`][]), `names` the $M$ parameter names."""

    basis: Callable
    names: tuple[str, ...]

    def __post_init__(self):
        object.__setattr__(self, "names", tuple(str(n) for n in self.names))
        m = np.asarray(self.basis(jnp.zeros(1))).shape
        if m != (1, len(self.names)):
            raise ValueError(
                f"TimeVarying: basis(t) must return shape (len(t), {len(self.names)}) "
                f"(one column per name), got {m} for one point."
            )


Coefficient = str | float | TimeVarying


@dataclasses.dataclass(frozen=True)
class Term:
    """$\\beta(t|\\theta)\\,D^r x_w$ on the right of the equation for `equation`."""

    equation: str
    variable: str
    derivative: int
    coefficient: Coefficient


@dataclasses.dataclass(frozen=True)
class Input:
    """$\\alpha(t|\\theta)\\,u(t)$ on the right of the equation for `equation`; `function`
    is a JAX-traceable $u(t)$ (e.g. a [`Pulse`][]); an optional `breaks` attribute lists its
    discontinuities."""

    equation: str
    function: Callable
    coefficient: Coefficient


def _check_coefficient(c, where: str) -> Coefficient:
    if isinstance(c, TimeVarying | str):
        return c
    if isinstance(c, int | float | np.floating | np.integer) and np.isfinite(c):
        return float(c)
    raise TypeError(
        f"{where}: a coefficient must be a parameter name (str), a finite number or TimeVarying, got {c!r}."
    )


class LinearODE:
    r"""A system of linear ODEs $D^{p_v}x_v = \sum \beta\,D^r x_w + \sum \alpha\,u_q$.

    - `orders`: `{variable: p_v}` (insertion order fixes the state order);
    - `terms`: [`Term`][]s; `inputs`: [`Input`][]s (known forcing);
    - parameters are the names used in the coefficients, in order of first appearance.

    `LinearODE.scalar(order, beta, inputs)` builds the one-variable case of Carey & Ramsay 2021, eq. (1).
    """

    def __init__(
        self,
        orders: Mapping[str, int],
        terms: Sequence[Term] = (),
        inputs: Sequence[Input] = (),
        name: str = "linear_ode",
    ):
        if not orders:
            raise ValueError("orders must name at least one variable.")
        self.orders = {str(v): int(p) for v, p in orders.items()}
        for v, p in self.orders.items():
            if p < 1:
                raise ValueError(f"orders: the order of '{v}' must be >= 1, got {p}.")
        self.terms = tuple(terms)
        self.inputs = tuple(inputs)
        self.name = str(name)
        seen, names = set(), []
        for i, term in enumerate(self.terms):
            where = f"terms[{i}]"
            for role, v in (("equation", term.equation), ("variable", term.variable)):
                if v not in self.orders:
                    raise ValueError(f"{where}: unknown {role} '{v}' (variables: {', '.join(self.orders)}).")
            if not 0 <= term.derivative < self.orders[term.variable]:
                raise ValueError(
                    f"{where}: derivative must be in 0..{self.orders[term.variable] - 1} for "
                    f"'{term.variable}' (its order is {self.orders[term.variable]}), "
                    f"got {term.derivative}."
                )
            key = (term.equation, term.variable, term.derivative)
            if key in seen:
                raise ValueError(
                    f"{where}: a second term for D^{term.derivative} {term.variable} in the "
                    f"equation of '{term.equation}'."
                )
            seen.add(key)
            names += self._names(_check_coefficient(term.coefficient, where))
        for i, inp in enumerate(self.inputs):
            where = f"inputs[{i}]"
            if inp.equation not in self.orders:
                raise ValueError(f"{where}: unknown equation '{inp.equation}'.")
            if not callable(inp.function):
                raise TypeError(f"{where}: function must be callable u(t), got {type(inp.function).__name__}.")
            names += self._names(_check_coefficient(inp.coefficient, where))
        self.param_names = tuple(dict.fromkeys(names))
        if not self.param_names:
            raise ValueError("the model has no unknown parameters: name at least one coefficient.")

    @classmethod
    def scalar(
        cls,
        order: int,
        beta: Sequence[Coefficient | None],
        inputs: Sequence[tuple[Callable, Coefficient]] = (),
        name: str = "linear_ode",
        variable: str = "x",
    ) -> "LinearODE":
        r"""$D^p x = \sum_{r<p} \beta_r D^r x + \sum_q \alpha_q u_q$ with `beta[r]` the
        coefficient of $D^r x$ (None: absent) and `inputs` pairs $(u_q, \alpha_q)$."""
        if len(beta) != order:
            raise ValueError(
                f"beta must have one entry per derivative 0..{order - 1} (None for absent), got {len(beta)}."
            )
        terms = [Term(variable, variable, r, b) for r, b in enumerate(beta) if b is not None]
        return cls({variable: order}, terms, [Input(variable, u, a) for u, a in inputs], name=name)

    @staticmethod
    def _names(c: Coefficient) -> list[str]:
        if isinstance(c, str):
            return [c]
        if isinstance(c, TimeVarying):
            return list(c.names)
        return []

    @property
    def variables(self) -> tuple[str, ...]:
        """The variables x_v in state order."""
        return tuple(self.orders)

    @property
    def n_params(self) -> int:
        """Number of parameters J."""
        return len(self.param_names)

    @property
    def max_order(self) -> int:
        """The highest derivative order p among the variables."""
        return max(self.orders.values())

    def breaks(self) -> np.ndarray:
        """Discontinuities of the forcing and breakpoints of time-varying coefficients."""
        pts = [getattr(i.function, "breaks", ()) for i in self.inputs]
        pts += [getattr(c.basis, "breaks", ()) for c in self._coefficients() if isinstance(c, TimeVarying)]
        return np.unique(np.concatenate([np.asarray(p, float).reshape(-1) for p in pts] + [np.zeros(0)]))

    def _coefficients(self):
        return [t.coefficient for t in self.terms] + [i.coefficient for i in self.inputs]

    def coefficient_atoms(self, c: Coefficient) -> tuple[list[Callable], np.ndarray, np.ndarray]:
        r"""A coefficient as $\sum_m (f_m + E_m\theta)\,\eta_m(t)$: the functions $\eta_m$,
        the fixed parts $f$ `(M,)` and the selection rows $E$ `(M, J)`."""
        J = self.n_params
        if isinstance(c, TimeVarying):
            E = np.zeros((len(c.names), J))
            E[np.arange(len(c.names)), [self.param_names.index(n) for n in c.names]] = 1.0
            return ([lambda t, m=m, b=c.basis: b(t)[:, m] for m in range(len(c.names))], np.zeros(len(c.names)), E)
        one = [lambda t: jnp.ones_like(t)]
        if isinstance(c, str):
            return one, np.zeros(1), np.eye(J)[[self.param_names.index(c)]]
        return one, np.array([float(c)]), np.zeros((1, J))

    def _coefficient_value(self, c: Coefficient, theta, t):
        if isinstance(c, str):
            return theta[self.param_names.index(c)]
        if isinstance(c, TimeVarying):
            idx = jnp.array([self.param_names.index(n) for n in c.names])
            return c.basis(jnp.reshape(t, (1,)))[0] @ theta[idx]
        return c

    def state_names(self) -> tuple[str, ...]:
        """Companion-form states: $x_v, Dx_v, \\dots, D^{p_v-1}x_v$ per variable."""
        return tuple(
            v if r == 0 else f"D{r}{v}" if r > 1 else f"D{v}" for v, p in self.orders.items() for r in range(p)
        )

    def ode_model(self) -> ODEModel:
        """The first-order companion system as an [`ODEModel`][wendyjax.ODEModel] (for
        forward solves, output-error fits and plots); its solves step onto the forcing's
        breaks (`jump_ts`)."""
        offsets = np.cumsum([0] + list(self.orders.values()))
        index = {v: int(o) for v, o in zip(self.orders, offsets)}

        def rhs(u, theta, t):
            out = []
            for v, p in self.orders.items():
                i = index[v]
                top = jnp.zeros((), u.dtype)
                for term in self.terms:
                    if term.equation == v:
                        top = (
                            top
                            + self._coefficient_value(term.coefficient, theta, t)
                            * u[index[term.variable] + term.derivative]
                        )
                for inp in self.inputs:
                    if inp.equation == v:
                        top = top + self._coefficient_value(inp.coefficient, theta, t) * inp.function(t)
                out += [u[i + r] for r in range(1, p)] + [top]
            return jnp.stack(out)

        jumps = self.breaks()
        return ODEModel(
            rhs,
            self.state_names(),
            self.param_names,
            linear_in_params=True,
            name=self.name,
            jump_ts=jumps if jumps.size else None,
        )
