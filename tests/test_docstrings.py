"""Every public name of wendyjax, and every public method and property of its public
classes, has a docstring (issue 7: "docstrings on every public name")."""

import importlib
import inspect
import pkgutil

import wendyjax


def _public_modules():
    names = ["wendyjax"] + [
        f"wendyjax.{m.name}" for m in pkgutil.iter_modules(wendyjax.__path__) if not m.name.startswith("_")
    ]
    return [importlib.import_module(n) for n in names]


def _undocumented():
    missing = set()
    for module in _public_modules():
        names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
        for name in names:
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            if not obj.__module__.startswith("wendyjax"):
                continue
            qual = f"{obj.__module__}.{obj.__qualname__}"
            if not inspect.getdoc(obj):
                missing.add(qual)
            if inspect.isclass(obj):
                for attr in vars(obj):
                    if attr.startswith("_"):
                        continue
                    raw = inspect.getattr_static(obj, attr)
                    if isinstance(raw, property):
                        doc = inspect.getdoc(raw)
                    elif inspect.isfunction(raw):
                        doc = inspect.getdoc(getattr(obj, attr))  # inherits an overridden method's docstring
                    else:
                        continue
                    if not doc:
                        missing.add(f"{qual}.{attr}")
    return sorted(missing)


def test_every_public_name_has_a_docstring():
    assert len(_public_modules()) > 10
    assert _undocumented() == []
