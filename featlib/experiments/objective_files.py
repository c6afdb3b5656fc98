"""Objectives of one's own, defined and registered in a Python file and loaded by its path.

A file that subclasses :class:`~featlib.objectives.Objective` and registers the class with
``@OBJECTIVES.register("my_name")`` is all Table 2's protocol needs: ``load_objective_file(path)``
(``--objective-file path`` of ``python -m featlib.cli.run_cmnist``) imports it and checks
every objective it registers before any training:

* the name: lowercase letters, digits and ``_`` (it names folders of pieces and cached files), and
  not a name already registered (the built-in objectives', or another file's);
* a ``label`` class attribute, when there is one: what tables print instead of the name
  (:func:`featlib.experiments.labels.label`), one line, not the label of another objective;
* the many-runs-at-once conventions of :mod:`.base`, on two small stacks shaped as the OOD
  stage's (:func:`check_objective`): ERM-NF's (logits ``(C, n_e)``, targets ``(n_e,)``, features
  ``(C, n_e, H)`` of a trained layer) and the frozen features' (logits ``(G, C, n_e)``, targets
  ``(G, 1, n_e)``, features ``(G, 1, n_e, H)``), on the plain path's call (``penalty``) and the
  fast path's (``closed_form=True``): loss and penalty of shape ``(*B,)``, risks ``(E, *B)``,
  finite, each run's loss a function of that run's tensors only, and the two penalties equal;
* its memory: the peak of its training step is counted on small stacks of both kinds, as for the
  built-in objectives (:func:`featlib.training.memory.fit_coefficients`; some seconds), so a
  protocol too large for the device is refused before it starts.

A file that fails any of these registers nothing (what it registered is taken back) and the
error is one line naming the file, the objective and the remedy.

**The three paths of the OOD stage.** ``"plain"`` calls :meth:`Objective.penalty`; ``"fast"``
calls :meth:`Objective.closed_form_penalty`, which is :meth:`~Objective.penalty` unless the class
overrides it, so no closed form is needed: a penalty that differentiates (``torch.autograd.grad``
with ``create_graph=True``) trains with a double backward there, as on the plain path.
``"compiled"`` compiles the step only where the penalty is first-order (``first_order = True``,
the default, or :meth:`~Objective.has_first_order_form`) and the objective keeps no state
(``stateful = False``); otherwise it trains that objective eager, the same numbers as ``"fast"``,
and :func:`path_notes` says so (the command prints it). A penalty that differentiates must set
``first_order = False``; if it does not, the compiled step fails to compile, and the compiled
path warns, records it in the run's provenance and trains eager
(:class:`~featlib.training.fast_stage.CompiledLoss`). An objective that keeps state between
steps must set ``stateful = True`` (no ERM pre-training prefix is then shared between its runs).

**Cached results follow the file.** The key of every cached OOD-stage piece and Table 2 piece of
a file's objective holds the SHA-256 of the file (:func:`objective_source`), so editing the file
computes that objective's pieces anew and never mixes them with older ones; the built-in
objectives' keys are unchanged. Code the file imports from elsewhere is not in the key.

Loading a file again is a no-op while its bytes are the same; after an edit it replaces the
objectives the earlier version registered. :func:`unload_objective_files` forgets every loaded
file (tests, notebooks).
"""
from __future__ import annotations

import hashlib
import re
import sys
import traceback
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from ..objectives.base import Objective
from ..objectives.registry import OBJECTIVES
from .labels import declared_label

#: Names a file may register: they name folders of pieces and cached files.
NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,39}")
GUIDE = "book/own_objective.md"


@dataclass(frozen=True)
class ObjectiveFile:
    """A loaded file: where it is, its SHA-256, its module and the objectives it registered."""

    path: Path
    sha256: str
    module: str
    objectives: tuple[str, ...]

    def record(self) -> dict:
        """What a provenance record keeps of it."""
        return {"path": str(self.path), "sha256": self.sha256, "objectives": list(self.objectives)}


_FILES: dict[Path, ObjectiveFile] = {}  # by resolved path
_SOURCE: dict[str, ObjectiveFile] = {}  # objective name -> its file


class _Refused(ValueError):
    pass


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _unregister(names) -> None:
    """Take ``names`` out of the registry and of the counted peaks."""
    from ..training.memory import PEAK_COEFFICIENTS

    for name in names:
        if name in OBJECTIVES:
            OBJECTIVES.unregister(name)
        for key in [k for k in PEAK_COEFFICIENTS if k[1] == name]:
            del PEAK_COEFFICIENTS[key]


def _forget(loaded: ObjectiveFile) -> None:
    """Undo a load: the registry, the counted peaks, the module and the process's compiled losses
    of its objectives (a later version of the file must never be served an earlier one's)."""
    from ..training import fast_stage

    _unregister(loaded.objectives)
    for name in loaded.objectives:
        _SOURCE.pop(name, None)
    for key in [k for k in fast_stage._COMPILED if k[1] in loaded.objectives]:
        fast_stage._COMPILED.pop(key, None)
        fast_stage._OBJECTIVES.pop(key, None)
    sys.modules.pop(loaded.module, None)
    _FILES.pop(loaded.path, None)


def unload_objective_files() -> None:
    """Forget every objective loaded from a file in this process."""
    for loaded in list(_FILES.values()):
        _forget(loaded)


def loaded_objective_files() -> list[ObjectiveFile]:
    """The files loaded in this process, in loading order."""
    return list(_FILES.values())


def objective_file(name: str) -> ObjectiveFile | None:
    """The file that registered objective ``name``; None for a built-in objective."""
    return _SOURCE.get(name)


def objective_source(name: str) -> dict:
    """What the cache keys of ``name``'s results hold beyond the protocol: for an objective loaded
    from a file ``{"objective_file_sha256": ...}``, for any other ``{}`` (keys unchanged)."""
    loaded = _SOURCE.get(name)
    return {} if loaded is None else {"objective_file_sha256": loaded.sha256}


def path_notes(name: str, ood_path: str) -> list[str]:
    """Sentences for the reader on how ``ood_path`` trains objective ``name`` where it departs
    from the path's usual way (empty when it does not): the compiled paths train an objective
    without a first-order form, or one that keeps state, eager."""
    if not ood_path.startswith("compiled"):
        return []
    objective = OBJECTIVES.get(name)()
    kinds = [kind for kind, head_only in (("ERM-NF", False), ("frozen-feature", True))
             if not objective.has_first_order_form(head_only, functional=True)]
    if objective.stateful:
        why = "it keeps state between steps: stateful = True"
    elif kinds:
        why = f"its penalty has no first-order form on {' and '.join(kinds)} stacks: first_order = False"
    else:
        return []
    return [f"--ood-path {ood_path} trains {name} eager, the same numbers as --ood-path fast but not compiled ({why})"]


# -------------------------------------------------------------------------------- loading
def _file_line(err: BaseException, path: Path) -> str:
    if isinstance(err, SyntaxError) and err.lineno:
        return f" (line {err.lineno})"
    lines = [f.lineno for f in traceback.extract_tb(err.__traceback__) if Path(f.filename) == path]
    return f" (line {lines[-1]})" if lines else ""


def load_objective_file(path, *, who: str | None = None) -> list[str]:
    """Import the Python file ``path``, check every objective it registers (see the module
    docstring) and return their names, in registration order. ``who`` names the value in error
    messages (``"--objective-file"`` for the command line; default ``"objective file"``).

    Raises ``ValueError`` with one line naming the file and the remedy where the file is missing,
    cannot be imported, registers nothing, registers a name already taken or an objective that
    breaks the many-runs-at-once conventions; it then registers nothing."""
    who = who or "objective file"
    raw = Path(path).expanduser()
    if not raw.is_file():
        raise ValueError(f"{who} {raw}: no such file; give the path of a Python file that registers an objective "
                         f"(see {GUIDE})")
    if raw.suffix != ".py":
        raise ValueError(f"{who} {raw}: not a Python file (.py); give the file that defines and registers the "
                         "objective")
    resolved = raw.resolve()
    data = resolved.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    previous = _FILES.get(resolved)
    if previous is not None:
        if previous.sha256 == sha:
            return list(previous.objectives)
        _forget(previous)  # edited since: its new version replaces it
    module_name = f"featlib_objective_file_{re.sub(r'[^0-9A-Za-z_]', '_', resolved.stem)}_{sha[:12]}"
    before = set(OBJECTIVES.names())
    added: list[str] = []
    original_register = OBJECTIVES.register

    def register(name):
        problem = "a name it registers twice; give each objective a name of its own" if name in added \
            else _name_problem(name)
        if problem:
            raise _Refused(f"{who} {raw}: it registers {name!r}, {problem}")
        added.append(name)
        return original_register(name)

    untouched = _featlib_state()  # what the file must leave as it is: featlib's modules, code and registries
    try:
        OBJECTIVES.register = register  # the file's registrations, checked as they happen
        try:
            module = types.ModuleType(module_name)
            module.__file__ = str(resolved)
            sys.modules[module_name] = module  # dataclasses and pickling look their module up
            # the very bytes hashed above run (no bytecode written beside the file)
            with _NoExit():
                exec(compile(data, str(resolved), "exec"), module.__dict__)  # noqa: S102
        except (_Refused, KeyboardInterrupt):
            raise
        except BaseException as err:  # noqa: BLE001  (the user's code: any error, SystemExit too, is one line)
            text = err.msg if isinstance(err, SyntaxError) else err
            raise _Refused(f"{who} {raw}: importing it raised {type(err).__name__}: {_one_line(text)}"
                           f"{_file_line(err, resolved)}; fix the file") from None
        finally:
            if "register" in vars(OBJECTIVES):
                del OBJECTIVES.register
            patched = _restore(untouched)  # whatever happened: featlib as it was before the file ran
        if patched:
            raise _Refused(f"{who} {raw}: it changes featlib's own code or torch's ({', '.join(patched[:3])}"
                           f"{', ...' if len(patched) > 3 else ''}), which would put changed numbers under the "
                           "built-in objectives' names and cache keys; define a new objective (a subclass registered "
                           "under a name of its own) instead")
        new = [n for n in OBJECTIVES.names() if n not in before]
        if not new:
            raise _Refused(f"{who} {raw}: it registers no objective; decorate a subclass of "
                           "featlib.objectives.Objective with @OBJECTIVES.register(\"my_name\") "
                           f"(from featlib.objectives import OBJECTIVES; see {GUIDE})")
        for name in new:
            if name not in added and not (isinstance(name, str) and NAME_PATTERN.fullmatch(name)):  # registered past
                raise _Refused(f"{who} {raw}: it registers {name!r}, {_name_problem(None)}")  # the checked register
            cls = OBJECTIVES.get(name)
            if not (isinstance(cls, type) and issubclass(cls, Objective)):
                raise _Refused(f"{who} {raw}: it registers {name!r} as a {type(cls).__name__}, not a subclass of "
                               "featlib.objectives.Objective; register the class of the objective")
            _check_label(name, cls, f"{who} {raw}")
            state = _featlib_state()  # its objective's code runs now: it must leave featlib and torch alone too
            try:
                with _NoExit():
                    check_objective(name, who=f"{who} {raw}")
            except SystemExit as err:
                raise _Refused(f"{who} {raw}: checking {name!r} raised SystemExit: {_one_line(err)}; fix the "
                               "file") from None
            finally:
                changed = _restore(state)
            if changed:
                raise _Refused(f"{who} {raw}: its objective {name!r} changes featlib's own code or torch's when it runs "
                               f"({', '.join(changed[:3])}{', ...' if len(changed) > 3 else ''}); compute the "
                               "penalty without changing them")
        for name in new:
            _count_memory(name, f"{who} {raw}")
    except BaseException as err:  # refused (or interrupted): everything it registered is taken back
        _unregister([n for n in OBJECTIVES.names() if n not in before])  # Registry.register(OBJECTIVES, ...) too
        sys.modules.pop(module_name, None)
        if isinstance(err, _Refused):
            raise ValueError(str(err)) from None
        raise
    loaded = ObjectiveFile(resolved, sha, module_name, tuple(new))
    _FILES[resolved] = loaded
    for name in new:
        _SOURCE[name] = loaded
    return list(new)


def _featlib_state() -> dict:
    """What a loaded file must leave as it is: every attribute of featlib's loaded modules, of
    their classes (and the registered objectives' classes, their whole MRO) and of its registries,
    by identity; the code of every function of featlib (``__code__``, defaults, closure cells),
    which a file could change in place; and every registry's contents (``_items``: names and
    identities)."""
    from ..registry import Registry

    state = {}

    def keep_class(klass) -> None:
        if klass is not object and ("class", klass) not in state:
            state[("class", klass)] = (klass, dict(vars(klass)))

    def keep_code(function) -> None:
        function = getattr(function, "__func__", function)  # staticmethod, classmethod, bound method
        if isinstance(function, types.FunctionType) and ("code", function) not in state:
            state[("code", function)] = (function, _code_of(function))

    def ours(obj) -> bool:
        return str(getattr(obj, "__module__", None) or "").split(".")[0] == "featlib"

    for module_name, module in list(sys.modules.items()):
        if (module_name == "featlib" or module_name.startswith("featlib.")) and isinstance(module, types.ModuleType):
            state[("module", module_name)] = (module, dict(vars(module)))
            for attr, value in list(vars(module).items()):
                if isinstance(value, Registry) and ("registry", value) not in state:
                    state[("registry", value)] = (value, (f"{module_name}.{attr}", dict(value._items)))
                    state[("object", value)] = (value, dict(vars(value)))
                elif isinstance(value, type) and ours(value):
                    keep_class(value)
                elif ours(value):
                    keep_code(value)
    for name in OBJECTIVES.names():
        cls = OBJECTIVES.get(name)
        for klass in (cls.__mro__ if isinstance(cls, type) else ()):
            keep_class(klass)
    # torch's namespaces that every result computes with: a file that patches torch.mean or
    # F.binary_cross_entropy_with_logits changes the built-in objectives' numbers as surely
    for module in _torch_modules():
        state[("module", module.__name__)] = (module, dict(vars(module)))
    for klass in (torch.Tensor, torch.nn.Module, torch.nn.Linear, torch.nn.Parameter, torch.optim.Adam,
                  torch.optim.Optimizer):
        keep_class(klass)
    for _, klass in [key for key in state if key[0] == "class"]:
        for value in vars(klass).values():
            for function in (value, *(getattr(value, f, None) for f in ("fget", "fset", "fdel"))):
                keep_code(function)
    return state


def _torch_modules() -> list[types.ModuleType]:
    import torch.nn.functional

    return [torch, torch.nn, torch.nn.functional, torch.autograd, torch.linalg, torch.special, torch.optim]


class _NoExit:
    """While a file runs (its import and its objectives' checks): ``os._exit`` raises SystemExit
    instead of ending the process, so that a file calling it is refused in one line rather than
    ending the command with exit status 0, having done nothing."""

    def __enter__(self):
        import os
        import posix

        self._saved = [(m, m._exit) for m in (os, posix) if hasattr(m, "_exit")]

        def refuse(code=0):
            raise SystemExit(f"os._exit({code})")

        for module, _ in self._saved:
            module._exit = refuse
        return self

    def __exit__(self, *exc):
        for module, original in self._saved:
            module._exit = original


def _code_of(function) -> tuple:
    """What a function computes with that a file can change in place: its code, its defaults (the
    tuple, and the keyword defaults' items) and the cells of its closure (each with what it holds)."""
    kwdefaults = function.__kwdefaults__
    cells = tuple((cell, cell.cell_contents if _filled(cell) else _MISSING_ATTR) for cell in function.__closure__ or ())
    return (function.__code__, function.__defaults__, kwdefaults,
            None if kwdefaults is None else tuple(kwdefaults.items()), cells)


def _same(a, b) -> bool:
    """Whether two values of :func:`_code_of` (nested tuples) hold the very same objects."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a is b


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:  # an empty cell
        return False
    return True


def _label(owner) -> str:
    return f"{getattr(owner, '__module__', '?')}.{getattr(owner, '__qualname__', owner)}"


def _restore(state: dict) -> list[str]:
    """Put back what a file changed in ``state``'s modules, classes, registries and functions; the
    names it changed. A registry may only gain objectives (``OBJECTIVES``: the file's own, checked
    by the caller); every other change of a registry's contents is a change of featlib."""
    changed = []
    for (kind, key), (owner, before) in state.items():
        if kind == "code":
            if not _same(_code_of(owner), before):
                changed.append(f"{_label(owner)} (its code)")
                owner.__code__, owner.__defaults__, owner.__kwdefaults__, kwdefaults, cells = before
                if kwdefaults is not None:
                    owner.__kwdefaults__.clear()
                    owner.__kwdefaults__.update(kwdefaults)
                for cell, content in cells:
                    if content is not _MISSING_ATTR:
                        cell.cell_contents = content
            continue
        if kind == "registry":
            label, items = before
            now = owner._items
            names = sorted(n for n in set(now) | set(items)
                           if now.get(n, _MISSING_ATTR) is not items.get(n, _MISSING_ATTR)
                           and not (owner is OBJECTIVES and n not in items))
            if names:
                changed.append(f"{label}[{', '.join(map(repr, names[:3]))}{', ...' if len(names) > 3 else ''}]")
                added = {n: v for n, v in now.items() if n not in items} if owner is OBJECTIVES else {}
                now.clear()
                now.update({**items, **added})
            continue
        now = vars(owner)
        label = {"module": key, "object": state.get(("registry", key), (None, ("",)))[1][0]}.get(kind) or _label(key)
        for attr in set(before) | set(now):
            if attr in ("__dict__", "__weakref__") or (kind == "module" and attr.startswith("__")):
                continue
            old, new = before.get(attr, _MISSING_ATTR), now.get(attr, _MISSING_ATTR)
            if old is new:
                continue
            if kind == "module" and old is _MISSING_ATTR and isinstance(new, types.ModuleType):
                continue  # a submodule imported for the first time binds itself in its package
            changed.append(f"{label}.{attr}")
            if old is _MISSING_ATTR:
                delattr(owner, attr)
            else:
                setattr(owner, attr, old)
    return sorted(changed)


_MISSING_ATTR = object()


def _name_problem(name) -> str | None:
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        return ("not a name of lowercase letters, digits and '_' (at most 40, starting with a letter); register it "
                "under such a name (it names folders and files)")
    if name in OBJECTIVES:
        owner = _SOURCE.get(name)
        if owner is None:
            return "the name of a built-in objective; register yours under another name"
        return f"a name that {owner.path} registered already; register yours under another name"
    return None


def _check_label(name: str, cls, where: str) -> None:
    from .labels import OBJECTIVE_LABELS

    value = getattr(cls, "label", None)
    if value is None:
        return
    if not isinstance(value, str) or not value.strip() or "\n" in value or len(value) > 40:
        raise _Refused(f"{where}: objective {name!r} declares label {value!r}; a label is one line of at most 40 "
                       "characters (or leave it out: tables then show the name)")
    taken = {**{label: key for key, label in OBJECTIVE_LABELS.items()},
             **{declared_label(n): n for n in OBJECTIVES.names() if n != name and declared_label(n)}}
    if value in taken or (value in OBJECTIVES.names() and value != name):
        raise _Refused(f"{where}: objective {name!r} declares label {value!r}, which names {taken.get(value, value)!r} "
                       "already; give it a label of its own")


# -------------------------------------------------------------------------------- checks
@dataclass
class _Stack:
    """A small stack as the OOD stage builds it: per environment logits, targets, features."""

    what: str
    batch: tuple[int, ...]
    logits: list
    targets: list
    features: list
    params: list
    head_only: bool


def _stacks() -> Iterator[_Stack]:
    gen = torch.Generator().manual_seed(0)
    sizes, hidden = (5, 7), 3  # two training environments of different sizes
    n = sum(sizes)
    bounds = [slice(0, sizes[0]), slice(sizes[0], n)]
    y = (torch.arange(n) % 2).float()[torch.randperm(n, generator=gen)]
    # ERM-NF: C = 3 whole networks on the same images; the features come from a trained layer
    x = torch.randn(n, 4, generator=gen)
    v = torch.randn(3, 4, hidden, generator=gen).requires_grad_()
    w = torch.randn(3, hidden, generator=gen).requires_grad_()
    b = torch.randn(3, generator=gen).requires_grad_()
    features = torch.tanh(x @ v)  # (3, n, H)
    logits = (features * w[:, None, :]).sum(-1) + b[:, None]  # (3, n)
    yield _Stack("an ERM-NF stack of 3 runs (logits (3, n_e), targets (n_e,))", (3,),
                 [logits[..., s] for s in bounds], [y[s] for s in bounds], [features[..., s, :] for s in bounds],
                 [v, w, b], False)
    # frozen features: G = 2 groups x C = 3 heads; features (G, 1, n, H) shared by a group's runs
    features = torch.randn(2, 1, n, hidden, generator=gen)
    w = torch.randn(2, 3, hidden, generator=gen).requires_grad_()
    b = torch.randn(2, 3, generator=gen).requires_grad_()
    logits = (features * w[..., None, :]).sum(-1) + b[..., None]  # (2, 3, n)
    targets = torch.stack([y, y.flip(0)]).unsqueeze(1)  # (G, 1, n): each group its own labels
    yield _Stack("a frozen-feature stack of 2 x 3 runs (logits (2, 3, n_e), targets (2, 1, n_e))", (2, 3),
                 [logits[..., s] for s in bounds], [targets[..., s] for s in bounds],
                 [features[..., s, :] for s in bounds], [w, b], True)


def check_objective(name: str, *, who: str = "objective") -> None:
    """Check the registered objective ``name`` against the many-runs-at-once conventions of
    :mod:`.base` on two small stacks (see the module docstring); ``ValueError``, one line, where
    it breaks one."""
    where = f"{who}: objective {name!r}"
    conventions = "leading run dimensions, featlib/objectives/base.py"
    for stack in _stacks():
        penalties = {}
        for closed_form in (False, True):
            call = "as the fast path calls it" if closed_form else "as the plain path calls it"
            try:
                objective = OBJECTIVES.get(name)(env_reduction="mean")
            except TypeError as err:
                raise _Refused(f"{where}: constructing it with env_reduction='mean' raised TypeError: "
                               f"{_one_line(err)}; let __init__ take **kwargs and pass them to super().__init__") from None
            weight = torch.linspace(10.0, 1000.0, int(torch.Size(stack.batch).numel())).reshape(stack.batch)
            try:
                out = objective(stack.logits, stack.targets, weight, features=stack.features, params=stack.params,
                                closed_form=closed_form, head_only=stack.head_only and closed_form)
            except Exception as err:  # noqa: BLE001
                raise _Refused(f"{where}: on {stack.what}, called {call}, it raised {type(err).__name__}: "
                               f"{_one_line(err)}; compute it per run ({conventions})") from None
            shapes = {"loss": stack.batch, "penalty": stack.batch, "risks": (len(stack.logits), *stack.batch)}
            for field, shape in shapes.items():
                value = getattr(out, field, None)
                if not isinstance(value, torch.Tensor) or tuple(value.shape) != shape:
                    got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                    raise _Refused(f"{where}: on {stack.what} its {field} has shape {got} where {shape} is needed "
                                   f"({call}); reduce over the examples (the last dimension) and the environments "
                                   f"only, never over the runs ({conventions})")
                if not torch.isfinite(value).all():
                    raise _Refused(f"{where}: on {stack.what} its {field} is not finite ({call}); keep it finite")
            if not out.loss.requires_grad:
                raise _Refused(f"{where}: on {stack.what} its loss carries no gradient ({call}); do not detach it")
            first = (0,) * len(stack.batch)
            try:
                grads = torch.autograd.grad(out.loss[first], stack.params, allow_unused=True, retain_graph=True)
            except Exception as err:  # noqa: BLE001
                raise _Refused(f"{where}: on {stack.what} differentiating its loss raised {type(err).__name__}: "
                               f"{_one_line(err)} ({call}); keep the loss differentiable") from None
            for param, grad in zip(stack.params, grads):
                if grad is None:
                    continue
                others = grad.reshape(-1, *grad.shape[len(stack.batch):])[1:]
                if others.abs().max() > 0:
                    raise _Refused(f"{where}: on {stack.what} the loss of run {first} depends on other runs' "
                                   f"tensors ({call}); compute each run's penalty from its own logits, features and "
                                   f"parameters only ({conventions})")
            penalties[closed_form] = out.penalty.detach()
        if not torch.allclose(penalties[True], penalties[False], rtol=1e-4, atol=1e-6):
            gap = (penalties[True] - penalties[False]).abs().max().item()
            raise _Refused(f"{where}: on {stack.what} closed_form_penalty differs from penalty by up to {gap:.3g}; "
                           "they must be equal (the fast path trains the one, the plain path the other)")


def _count_memory(name: str, where: str) -> None:
    """Count the peak of ``name``'s training step on small stacks of both kinds, as for the
    built-in objectives (:data:`featlib.training.memory.PEAK_COEFFICIENTS`)."""
    from ..training import memory

    for kind in memory.KINDS:
        try:
            memory.PEAK_COEFFICIENTS[(kind, name)] = memory.fit_coefficients(kind, name)
        except Exception as err:  # noqa: BLE001
            stack = "ERM-NF" if kind == "mlp" else "frozen-feature"
            raise _Refused(f"{where}: objective {name!r}: training it on small {stack} stacks (the fast path, to count "
                           f"its memory) raised {type(err).__name__}: {_one_line(err)}; fix the objective") from None
