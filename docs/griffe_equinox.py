"""Griffe extension: equinox Modules get the constructor signature that equinox generates
(dataclass fields, inherited ones included), so the API reference shows `MLE(solver=...,
max_steps=..., start=...)` instead of a bare class name. The signature is read from the
imported class; a parameter keeps the annotation written in the source where there is one."""

import importlib
import inspect

import equinox as eqx
import griffe


class EquinoxInit(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        for cls in _classes(pkg):
            if "__init__" in cls.members:
                continue
            try:
                runtime = getattr(importlib.import_module(cls.module.path), cls.name)
            except (ImportError, AttributeError):
                continue
            if not (isinstance(runtime, type) and issubclass(runtime, eqx.Module)) or inspect.isabstract(runtime):
                continue
            params = [griffe.Parameter("self", kind=griffe.ParameterKind.positional_or_keyword)]
            for p in inspect.signature(runtime).parameters.values():
                static = cls.all_members.get(p.name)
                annotation = getattr(static, "annotation", None) or _text(p.annotation)
                default = None if p.default is inspect.Parameter.empty else repr(p.default)
                params.append(
                    griffe.Parameter(
                        p.name, annotation=annotation, default=default, kind=griffe.ParameterKind(p.kind.description)
                    )
                )
            cls.set_member(
                "__init__",
                griffe.Function("__init__", parent=cls, returns="None", parameters=griffe.Parameters(*params)),
            )


def _classes(obj):
    for member in obj.members.values():
        if member.is_alias:
            continue
        if member.is_class:
            yield member
        if member.is_module:
            yield from _classes(member)


def _text(annotation) -> str | None:
    if annotation is inspect.Parameter.empty:
        return None
    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
