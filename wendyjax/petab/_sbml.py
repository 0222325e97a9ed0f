"""An SBML model as symbolic ODEs: states, constant parameters, right-hand sides and initial
values in sympy, read with python-libsbml and translated with sbmlmath."""

import dataclasses
import math
from pathlib import Path

import libsbml
import sbmlmath
import sympy as sp

TIME = sp.Symbol("time")


class PetabError(ValueError):
    """A PEtab problem that wendyjax cannot read or cannot represent; the message names the
    file (and row and column, for a table) and what to change."""


@dataclasses.dataclass(frozen=True)
class SbmlOde:
    """Symbolic ODE of an SBML model. `rhs` and `initial` are in terms of `states`,
    `parameters` and `TIME` (`initial` of `parameters` only); `expressions` maps every
    assignment-rule variable and reaction id to its expression in the same symbols."""

    states: tuple[str, ...]
    parameters: tuple[str, ...]
    values: dict[str, float]
    rhs: tuple[sp.Basic, ...]
    initial: tuple[sp.Basic, ...]
    expressions: dict[str, sp.Basic]


def _math(source, where: str) -> sp.Basic:
    """The sympy expression of an SBML element's math: symbols by plain name, time as TIME."""
    if source.getMath() is None:
        raise PetabError(f"{where} has no math.")
    expr = sbmlmath.sbml_math_to_sympy(source, floats_as_rationals=False)
    swap = {}
    for s in expr.free_symbols:
        if isinstance(s, sbmlmath.TimeSymbol):
            swap[s] = TIME
        elif isinstance(s, sp.Symbol):
            swap[s] = sp.Symbol(s.name)
    expr = expr.xreplace(swap)
    unsupported = [f for f in expr.atoms(sp.Function) if isinstance(f, (sbmlmath.Delay, sbmlmath.RateOf))]
    if unsupported:
        raise PetabError(
            f"{where} uses {type(unsupported[0]).__name__} (delay or rateOf), which wendyjax cannot represent."
        )
    return expr


def _resolve(expressions: dict[sp.Symbol, sp.Basic], where: str) -> dict[sp.Symbol, sp.Basic]:
    """Substitute the expressions into each other until none refers to another (rules in any
    order, as SBML allows); a cycle is refused."""
    resolved = dict(expressions)
    for _ in range(len(resolved) + 1):
        changed = False
        for key, expr in resolved.items():
            new = expr.xreplace(resolved)
            if new != expr:
                resolved[key], changed = new, True
        if not changed:
            return resolved
    raise PetabError(f"{where}: the assignment rules refer to each other in a cycle.")


def read_sbml(path: Path) -> SbmlOde:
    """Read the SBML file at `path` into symbolic ODEs; refuses events, algebraic rules,
    delays, variable compartments and variable stoichiometries by name."""
    where = f"SBML model {path.name}"
    document = libsbml.readSBMLFromFile(str(path))
    errors = [
        document.getError(i)
        for i in range(document.getNumErrors())
        if document.getError(i).getSeverity() >= libsbml.LIBSBML_SEV_ERROR
    ]
    if errors or document.getModel() is None:
        detail = errors[0].getMessage().strip() if errors else "no model element"
        raise PetabError(f"{where} cannot be read: {detail}")
    expand = libsbml.ConversionProperties()
    expand.addOption("expandFunctionDefinitions", True)
    if document.convert(expand) != libsbml.LIBSBML_OPERATION_SUCCESS:
        raise PetabError(f"{where}: its function definitions could not be expanded.")
    model = document.getModel()
    if model.getNumEvents():
        raise PetabError(
            f"{where} has events ({model.getEvent(0).getId() or 'unnamed'}), which wendyjax does not "
            f"support: use a tool with event handling (AMICI, PEtab.jl) for this problem."
        )
    if model.getNumConstraints():
        raise PetabError(f"{where} has constraints, which wendyjax does not support.")

    assignment, rate = {}, {}
    for rule in model.getListOfRules():
        if rule.isAlgebraic():
            raise PetabError(f"{where} has an algebraic rule, which wendyjax does not support (ODEs only).")
        target = rule.getVariable()
        (assignment if rule.isAssignment() else rate)[target] = _math(rule, f"{where}, rule for {target}")

    values: dict[str, float] = {}
    parameters: list[str] = []
    for compartment in model.getListOfCompartments():
        cid = compartment.getId()
        if cid in rate or cid in assignment or not compartment.getConstant():
            raise PetabError(f"{where}: compartment {cid} changes in time, which wendyjax does not support.")
        values[cid] = compartment.getSize() if compartment.isSetSize() else 1.0
        parameters.append(cid)
    for parameter in model.getListOfParameters():
        pid = parameter.getId()
        if pid not in assignment and pid not in rate:
            values[pid] = parameter.getValue() if parameter.isSetValue() else math.nan
            parameters.append(pid)

    initial_assign = {
        a.getSymbol(): _math(a, f"{where}, initial assignment of {a.getSymbol()}")
        for a in model.getListOfInitialAssignments()
    }
    # Constant parameters set by an initial assignment are expressions of the others.
    constants = {sp.Symbol(p): initial_assign.pop(p) for p in list(parameters) if p in initial_assign}
    parameters = [p for p in parameters if sp.Symbol(p) not in constants]

    rate_ruled = set(rate)
    states: list[str] = []
    flux: dict[str, sp.Basic] = {}
    initial: dict[str, sp.Basic] = {}
    scale: dict[str, sp.Basic] = {}  # amount per unit of the species' symbol: its compartment's size, or 1
    for species in model.getListOfSpecies():
        sid = species.getId()
        if sid in assignment:
            continue
        size = sp.Symbol(species.getCompartment())
        amounts = species.getHasOnlySubstanceUnits()
        scale[sid] = sp.Integer(1) if amounts else size
        if species.isSetInitialConcentration():
            value = sp.Float(species.getInitialConcentration()) * (size if amounts else 1)
        elif species.isSetInitialAmount():
            value = sp.Float(species.getInitialAmount()) / (1 if amounts else size)
        else:
            value = sp.nan
        initial[sid] = initial_assign.pop(sid, value)
        states.append(sid)
        flux[sid] = rate.pop(sid) if sid in rate else sp.Integer(0)
    for pid in list(rate):
        parameter = model.getParameter(pid)
        if parameter is None:
            raise PetabError(f"{where}: the rate rule for {pid} targets neither a species nor a parameter.")
        states.append(pid)
        flux[pid] = rate.pop(pid)
        initial[pid] = initial_assign.pop(pid, sp.Float(parameter.getValue()))

    reactions: dict[str, sp.Basic] = {}
    for reaction in model.getListOfReactions():
        rid = reaction.getId()
        law = reaction.getKineticLaw()
        if law is None:
            raise PetabError(f"{where}: reaction {rid} has no kinetic law.")
        local = {
            sp.Symbol(q.getId()): sp.Float(q.getValue())
            for q in list(law.getListOfParameters()) + list(law.getListOfLocalParameters())
        }
        reactions[rid] = _math(law, f"{where}, kinetic law of {rid}").xreplace(local)
        for sign, refs in ((-1, reaction.getListOfReactants()), (1, reaction.getListOfProducts())):
            for ref in refs:
                sid = ref.getSpecies()
                species = model.getSpecies(sid)
                if ref.isSetStoichiometryMath() or (ref.isSetId() and ref.getId() in assignment | rate):
                    raise PetabError(
                        f"{where}: reaction {rid} has a variable stoichiometry for {sid}, which wendyjax "
                        f"does not support."
                    )
                if species.getBoundaryCondition() or species.getConstant() or sid in rate_ruled or sid in assignment:
                    continue
                stoich = ref.getStoichiometry() if ref.isSetStoichiometry() else 1.0
                flux[sid] = flux[sid] + sign * sp.Float(stoich) * sp.Symbol(rid) / scale[sid]
    if initial_assign:
        name = next(iter(initial_assign))
        raise PetabError(f"{where}: the initial assignment of {name} targets no species, parameter or compartment.")

    rules = {sp.Symbol(k): v for k, v in assignment.items()} | {sp.Symbol(k): v for k, v in reactions.items()}
    resolved = _resolve(rules | constants, where)
    rhs = tuple(sp.sympify(flux[s]).xreplace(resolved) for s in states)
    # Initial values may refer to other states' initial values and to rule variables at t = 0.
    start = _resolve({sp.Symbol(s): initial[s].xreplace(resolved) for s in states}, where)
    start = {k: v.xreplace(resolved).xreplace(start).subs(TIME, 0) for k, v in start.items()}
    expressions = {str(k): v for k, v in resolved.items()}
    return SbmlOde(
        states=tuple(states),
        parameters=tuple(parameters),
        values=values,
        rhs=rhs,
        initial=tuple(start[sp.Symbol(s)] for s in states),
        expressions=expressions,
    )
