"""Search spaces: load and validate the YAML files, draw points, turn points into configs.

A search space is one YAML file per framework and hardware target
(``search_spaces/<framework>-<target>.yaml``) in Optuna's short form::

    framework: torch
    target: cpu
    description: ...
    params:
      batch_size: {type: int, low: 16, high: 512, log: true}
      optimizer: {type: categorical, choices: [sgd, momentum, adam]}
      momentum: {type: float, low: 0.5, high: 0.99, when: {optimizer: [momentum]}}
      threads: {type: int, low: 1, high: "${cores}"}
    fixed:
      inter_op_threads: 1

Parameter names are :class:`advisor.records.Config` field names. ``when`` makes a parameter
conditional on the values of parameters defined above it. ``${cores}`` and ``${cores_half}`` are
resolved at load time from the cores available to the study.

This module imports no Optuna: :mod:`advisor.tuning` turns :class:`Param` into distributions, and
:meth:`SearchSpace.sample` draws points with numpy alone (for ``recommend``'s candidates).
"""

from __future__ import annotations

import math
import os
import reprlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Collection, Mapping, Sequence

import numpy as np
import yaml

from advisor.errors import SearchSpaceError
from advisor.knobs import FRAMEWORK_INFO, FRAMEWORKS, KNOBS, TARGETS, get_knob, knob_applies
from advisor.records import Config

__all__ = [
    "Param",
    "SearchSpace",
    "TARGETS",
    "list_spaces",
    "load_space",
    "space_from_document",
    "combined_space",
    "spaces_dir",
    "available_cores",
]

MAX_FILE_BYTES = 1_000_000
MAX_DEPTH = 8
MAX_PARAMS = 64
MAX_CHOICES = 1_000
TOP_LEVEL_KEYS = ("framework", "target", "description", "params", "fixed")
PARAM_KEYS = ("type", "low", "high", "log", "step", "choices", "when")
TYPES = ("int", "float", "categorical")
PLACEHOLDERS = ("${cores}", "${cores_half}")
BOOL = (True, False)
MAX_INT = 10**15  # far beyond any sane bound; keeps float() and :g formatting of file ints safe

# Derived from the knob declarations: numeric knobs as (kind, low, high) limits a file may use,
# categorical-only knobs (choices and booleans) with their allowed values.
_NUMERIC: dict[str, tuple[str, float, float]] = {
    k.name: (k.type, k.low, k.high) for k in KNOBS  # type: ignore[misc]
    if k.searchable and k.type in ("int", "float")
}
_CATEGORICAL: dict[str, tuple[Any, ...]] = {
    k.name: (BOOL if k.type == "bool" else k.choices) for k in KNOBS
    if k.searchable and k.type in ("bool", "choice")
}
PARAM_NAMES = tuple(_NUMERIC) + tuple(_CATEGORICAL)
FIXED_NAMES = PARAM_NAMES + ("device",)


def spaces_dir() -> Path:
    """The folder of the built-in search spaces (package data, or the repository's copy)."""
    import advisor

    packaged = Path(advisor.__file__).resolve().parent / "search_spaces"
    if packaged.is_dir():
        return packaged
    return Path(advisor.__file__).resolve().parent.parent / "search_spaces"


def available_cores() -> int:
    """Number of CPUs this process may run on (its affinity set)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def list_spaces() -> list[str]:
    """Names of the built-in search spaces, for example ``torch-cpu``."""
    return sorted(p.stem for p in spaces_dir().glob("*.yaml"))


@dataclass(frozen=True)
class Param:
    """One searched parameter.

    Attributes:
        name: A Config field name (``framework.field`` inside a combined space).
        type: ``int``, ``float`` or ``categorical``.
        low, high: Inclusive bounds of a numeric parameter.
        log: Sample uniformly in log space.
        step: Grid step of a numeric parameter, or ``None``.
        choices: The values of a categorical parameter.
        when: Conditions as ``((param, (allowed values...)), ...)``; all must hold.
    """

    name: str
    type: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: tuple[Any, ...] = ()
    when: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    def is_active(self, chosen: Mapping[str, Any]) -> bool:
        """Whether every condition holds for the values ``chosen`` so far."""
        return all(name in chosen and chosen[name] in values for name, values in self.when)

    def contains(self, value: Any) -> bool:
        """Whether ``value`` is a point of this parameter's domain."""
        if self.type == "categorical":
            return any(_same(value, c) for c in self.choices)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        assert self.low is not None and self.high is not None
        return self.low <= value <= self.high and (self.type == "float" or float(value).is_integer())

    def sample(self, rng: np.random.Generator) -> Any:
        """Draw one value (uniform, or log-uniform when ``log``; on the grid when ``step``)."""
        if self.type == "categorical":
            return self.choices[int(rng.integers(len(self.choices)))]
        assert self.low is not None and self.high is not None
        low, high = self.low, self.high
        if self.step is not None:
            value = low + self.step * int(rng.integers(int(round((high - low) / self.step)) + 1))
        elif self.log:
            value = math.exp(rng.uniform(math.log(low), math.log(high)))
        else:
            value = rng.uniform(low, high)
        value = min(max(value, low), high)
        return int(round(value)) if self.type == "int" else float(value)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.type}
        if self.type == "categorical":
            data["choices"] = list(self.choices)
        else:
            data.update(low=self.low, high=self.high)
            if self.log:
                data["log"] = True
            if self.step is not None:
                data["step"] = self.step
        if self.when:
            data["when"] = {k: list(v) for k, v in self.when}
        return data


def _knob_name(name: str) -> str:
    """The knob of a parameter name (``torch.batch_size`` in a combined space)."""
    return name.rsplit(".", 1)[-1]


def _same(a: Any, b: Any) -> bool:
    # 1 == True in Python; a categorical of booleans must not accept 1.
    return type(a) is type(b) and a == b or (
        not isinstance(a, bool) and not isinstance(b, bool)
        and isinstance(a, (int, float)) and isinstance(b, (int, float)) and a == b
    )


@dataclass(frozen=True)
class SearchSpace:
    """A validated search space with its placeholders resolved.

    Attributes:
        name: ``torch-cpu``, a file stem, or ``any-cpu`` for a combined space.
        framework: A framework name, or ``any`` for a combined space.
        target: ``cpu`` or ``gpu``.
        params: The searched parameters, in file order (conditions refer to earlier ones).
        fixed: Config fields set to one value.
        source: Where it came from (a path, or ``combined:<frameworks>``).
        description: Free text from the file.
        document: The file's mapping as written (placeholders unresolved), so a worker on another
            machine can rebuild the space with its own core count.
    """

    name: str
    framework: str
    target: str
    params: tuple[Param, ...]
    fixed: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""
    description: str = ""
    document: Mapping[str, Any] = field(default_factory=dict)

    @property
    def frameworks(self) -> tuple[str, ...]:
        """The frameworks this space can produce configs for."""
        if self.framework == "any":
            return tuple(self.param("framework").choices)
        return (self.framework,)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def active_params(self, chosen: Mapping[str, Any]) -> list[Param]:
        """The parameters whose conditions hold for ``chosen``."""
        return [p for p in self.params if p.is_active(chosen)]

    def sample(self, rng: np.random.Generator, *, exclude: Collection[str] = ()) -> dict[str, Any]:
        """Draw one valid point: every active parameter once, in order, respecting conditions.

        Args:
            rng: The random stream.
            exclude: Knobs not to draw (they keep their defaults), e.g. ``augment_flip`` on a
                dataset whose mirrored images change class.
        """
        chosen: dict[str, Any] = {}
        for p in self.params:
            if p.is_active(chosen) and _knob_name(p.name) not in exclude:
                chosen[p.name] = p.sample(rng)
        return chosen

    def to_config(self, params: Mapping[str, Any], *, seed: int = 0) -> Config:
        """Build the Config for a point of this space.

        Args:
            params: Parameter values by name (inactive conditional parameters may be absent).
            seed: The trial's seed.

        Returns:
            A validated :class:`Config`; fields neither searched nor fixed keep their defaults.
        """
        values = dict(params)
        framework = self.framework
        fixed = dict(self.fixed)
        if framework == "any":
            framework = values.pop("framework", None)
            if framework not in self.frameworks:
                raise SearchSpaceError(
                    f"{self.name}: params.framework: one of {', '.join(self.frameworks)} is needed; "
                    f"found {_show(framework)}"
                )
            prefix = framework + "."
            values = {k[len(prefix):]: v for k, v in values.items() if k.startswith(prefix)}
            fixed = {k[len(prefix):]: v for k, v in fixed.items() if k.startswith(prefix)}
        merged = {**fixed, **values}
        merged.setdefault("device", "cuda" if self.target == "gpu" else "cpu")
        return Config(framework=framework, seed=seed, **merged)

    def to_dict(self) -> dict[str, Any]:
        """The resolved space as plain data (for ``spaces show --json`` and study attributes)."""
        return {
            "name": self.name,
            "framework": self.framework,
            "target": self.target,
            "description": self.description,
            "source": self.source,
            "params": {p.name: p.to_dict() for p in self.params},
            "fixed": dict(self.fixed),
        }


# ----------------------------------------------------------------------------------- loading


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxset, _REPR.maxtuple = 2, 6, 6, 6, 6
_REPR.maxstring, _REPR.maxother, _REPR.maxlong = 60, 60, 40
MAX_SHOWN = 200


def _show(value: Any) -> str:
    """A short repr of a value from the file: YAML aliases can make a 1 KB file's value enormous."""
    try:
        text = _REPR.repr(value)
    except (ValueError, RecursionError):  # an int past Python's digit limit, a self-referencing alias
        text = f"<{type(value).__name__}>"
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."


def _name(value: Any) -> str:
    """A key from the file as it appears in an error's dotted path, shortened when long."""
    return value if isinstance(value, str) and len(value) <= _REPR.maxstring else _show(value)


def _fail(where: str, key: str, message: str) -> SearchSpaceError:
    return SearchSpaceError(f"{where}: {key}: {message}" if key else f"{where}: {message}")


def _depth(obj: Any, seen: dict[int, int]) -> int:
    # Memoised by identity: YAML aliases share objects, so a "billion laughs" file stays linear.
    key = id(obj)
    if key in seen:
        return seen[key]
    seen[key] = 0
    if isinstance(obj, dict):
        d = 1 + max((_depth(v, seen) for v in obj.values()), default=0)
    elif isinstance(obj, list):
        d = 1 + max((_depth(v, seen) for v in obj), default=0)
    else:
        d = 0
    seen[key] = d
    return d


def _read_yaml(path: Path, where: str) -> Any:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise SearchSpaceError(f"{where}: cannot read the file ({exc.strerror or exc})") from None
    if size > MAX_FILE_BYTES:
        raise _fail(where, "", f"the file must be at most {MAX_FILE_BYTES:,} bytes; found {size:,} bytes")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SearchSpaceError(f"{where}: cannot read the file as UTF-8 text ({exc})") from None
    try:
        return yaml.safe_load(text)
    except RecursionError:
        raise _fail(where, "", f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # a constructor's own check: an int past Python's digit limit, a bad date
        raise _fail(where, "", f"a value cannot be read: {' '.join(str(exc).split())[:MAX_SHOWN]}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        line = f" (line {mark.line + 1})" if mark is not None else ""
        problem = " ".join(str(problem).split())
        raise _fail(where, "", f"not a plain YAML mapping: {problem}{line}") from None


def load_space(name_or_path: str | os.PathLike[str], *, cores: int | None = None) -> SearchSpace:
    """Load and validate a built-in space (``torch-cpu``) or a YAML file.

    Args:
        name_or_path: A built-in name from :func:`list_spaces`, or a path to a ``.yaml`` file.
        cores: Cores available to the study, for ``${cores}``; defaults to this process's affinity.

    Returns:
        The validated :class:`SearchSpace`.

    Raises:
        SearchSpaceError: One line naming the file and the key, what is accepted and what was found.
    """
    text = os.fspath(name_or_path)
    path = Path(text)
    if not (text.endswith((".yaml", ".yml")) or os.sep in text or path.exists()):
        path = spaces_dir() / f"{text}.yaml"
        if not path.is_file():
            raise SearchSpaceError(
                f"Unknown search space {_show(text)}: choose one of {', '.join(list_spaces())} or give a .yaml file."
            )
    where = path.name
    document = _read_yaml(path, where)
    return space_from_document(document, name=path.stem, where=where, source=str(path), cores=cores)


def space_from_document(
    document: Any, *, name: str, where: str | None = None, source: str = "", cores: int | None = None
) -> SearchSpace:
    """Validate a parsed search-space mapping and resolve its placeholders.

    Args:
        document: The mapping as ``yaml.safe_load`` returned it.
        name: The space's name.
        where: The file name used in error messages (default ``<name>.yaml``).
        source: Where the document came from.
        cores: Cores available to the study (default: this process's affinity set).

    Raises:
        SearchSpaceError: When anything is invalid.
    """
    where = where or f"{name}.yaml"
    if _depth(document, {}) > MAX_DEPTH:
        raise _fail(where, "", f"nested deeper than {MAX_DEPTH} levels")
    if not isinstance(document, dict):
        raise _fail(where, "", f"the file must be a mapping with keys {', '.join(TOP_LEVEL_KEYS)}; "
                    f"found {type(document).__name__}")
    for key in document:
        if key not in TOP_LEVEL_KEYS:
            raise _fail(where, "", f"unknown top-level key {_show(key)}; accepted: {', '.join(TOP_LEVEL_KEYS)}")
    framework = document.get("framework")
    if framework not in FRAMEWORKS:
        raise _fail(where, "framework", f"must be one of {', '.join(FRAMEWORKS)}; found {_show(framework)}")
    target = document.get("target")
    if target not in TARGETS:
        raise _fail(where, "target", f"must be one of {', '.join(TARGETS)}; found {_show(target)}")
    description = document.get("description", "")
    if not isinstance(description, str):
        raise _fail(where, "description", f"must be text; found {type(description).__name__}")
    ncores = max(1, int(cores if cores is not None else available_cores()))
    resolve = {"${cores}": ncores, "${cores_half}": max(1, ncores // 2)}

    raw_params = document.get("params")
    if not isinstance(raw_params, dict) or not raw_params:
        raise _fail(where, "params", f"must be a non-empty mapping of parameter names; found {_show(raw_params)}")
    if len(raw_params) > MAX_PARAMS:
        raise _fail(where, "params", f"at most {MAX_PARAMS} parameters are accepted; found {len(raw_params)}")
    params: list[Param] = []
    for pname, spec in raw_params.items():
        params.append(_parse_param(where, pname, spec, framework, target, resolve, params))

    raw_fixed = document.get("fixed") or {}
    if not isinstance(raw_fixed, dict):
        raise _fail(where, "fixed", f"must be a mapping of Config fields to values; found {_show(raw_fixed)}")
    fixed: dict[str, Any] = {}
    for fname, value in raw_fixed.items():
        fixed[fname] = _parse_fixed(where, fname, value, framework, target, resolve)
        if any(p.name == fname for p in params):
            raise _fail(where, f"fixed.{fname}", "is also under params; a field is either searched or fixed")
    space = SearchSpace(
        name=name, framework=framework, target=target, params=tuple(params), fixed=fixed,
        source=source, description=description.strip(), document=document,
    )
    _check_consistency(where, space)
    return space


def _check_consistency(where: str, space: SearchSpace) -> None:
    names = {p.name for p in space.params}
    if "optimizer" in names:
        opts = space.param("optimizer").choices
    else:
        opts = (space.fixed.get("optimizer", "sgd"),)
    if "momentum" in opts and "momentum" not in names and not space.fixed.get("momentum"):
        raise _fail(where, "params.optimizer", "offers 'momentum', so a 'momentum' parameter (or a fixed "
                    "momentum > 0) is needed; found none")
    offered = FRAMEWORK_INFO[space.framework].optimizers
    for opt in opts:
        if opt not in offered:
            raise _fail(where, "params.optimizer", f"{space.framework} accepts {', '.join(offered)} only; "
                        f"found {_show(opt)}")
    device = space.fixed.get("device", "cuda" if space.target == "gpu" else "cpu")
    if (space.target == "gpu") != str(device).startswith("cuda"):
        raise _fail(where, "fixed.device", f"must match target {_show(space.target)}; found {_show(device)}")
    # Every extreme corner must build a valid Config: catches e.g. a fixed momentum with sgd.
    probe: dict[str, Any] = {}
    for p in space.params:
        if p.is_active(probe):
            probe[p.name] = p.choices[0] if p.type == "categorical" else p.low
    try:
        space.to_config(probe)
    except (ValueError, TypeError) as exc:
        raise _fail(where, "", f"does not build a valid Config: {exc}") from None


def _resolve(where: str, key: str, value: Any, resolve: Mapping[str, int]) -> Any:
    if isinstance(value, str) and "${" in value:
        if value not in resolve:
            raise _fail(where, key, f"unknown placeholder {_show(value)}; accepted: {', '.join(PLACEHOLDERS)}")
        return resolve[value]
    return value


def _number(where: str, key: str, value: Any, kind: str) -> float:
    if isinstance(value, str):
        hint = " (write 1.0e-4, not 1e-4: YAML reads the latter as text)" if "e" in value.lower() else ""
        raise _fail(where, key, f"must be a number; found the text {_show(value)}{hint}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(where, key, f"must be a number; found {_show(value)}")
    if isinstance(value, int) and not -MAX_INT <= value <= MAX_INT:  # float() of it would overflow
        digits = int(value.bit_length() * math.log10(2)) + 1
        raise _fail(where, key, f"must be a number of at most {MAX_INT:.0e} in magnitude; found an integer "
                    f"of about {digits:,} digits")
    if not math.isfinite(value):
        raise _fail(where, key, f"must be a finite number; found {_show(value)}")
    if kind == "int" and not (isinstance(value, int) or float(value).is_integer()):
        raise _fail(where, key, f"must be an integer; found {_show(value)}")
    return int(value) if kind == "int" else float(value)


def _check_applies(where: str, key: str, name: str, framework: str, target: str) -> None:
    knob = get_knob(name)
    if not knob_applies(knob, framework):
        raise _fail(where, key, f"applies to {', '.join(knob.frameworks or ())} only; found in a {framework} space")
    if not knob_applies(knob, framework, target):
        raise _fail(where, key, f"applies to {', '.join(knob.targets)} spaces only; found in a {target} space")


def _parse_param(
    where: str, name: Any, spec: Any, framework: str, target: str, resolve: Mapping[str, int],
    earlier: Sequence[Param],
) -> Param:
    key = f"params.{_name(name)}"
    if name not in PARAM_NAMES:
        extra = " ('seed' comes from --seed; 'device' from the target)" if name in ("seed", "device") else ""
        raise _fail(where, key, f"unknown parameter; accepted: {', '.join(PARAM_NAMES)}{extra}")
    _check_applies(where, key, name, framework, target)
    if not isinstance(spec, dict):
        raise _fail(where, key, f"must be a mapping like {{type: int, low: 1, high: 8}}; found {_show(spec)}")
    for k in spec:
        if k not in PARAM_KEYS:
            raise _fail(where, key, f"unknown key {_show(k)}; accepted: {', '.join(PARAM_KEYS)}")
    ptype = spec.get("type")
    if ptype not in TYPES:
        raise _fail(where, f"{key}.type", f"must be one of {', '.join(TYPES)}; found {_show(ptype)}")
    when = _parse_when(where, key, spec.get("when"), earlier)

    if ptype == "categorical":
        for k in ("low", "high", "log", "step"):
            if k in spec:
                raise _fail(where, key, f"{_show(k)} does not apply to a categorical parameter; use 'choices' only")
        choices = spec.get("choices")
        if not isinstance(choices, list) or not choices:
            raise _fail(where, f"{key}.choices", f"must be a non-empty list; found {_show(choices)}")
        if len(choices) > MAX_CHOICES:
            raise _fail(where, f"{key}.choices", f"at most {MAX_CHOICES} choices; found {len(choices)}")
        resolved = [_resolve(where, f"{key}.choices", c, resolve) for c in choices]
        for c in resolved:
            _check_value(where, f"{key}.choices", name, c)
        if len({(type(c), c) for c in resolved}) != len(resolved):
            raise _fail(where, f"{key}.choices", f"must not repeat a value; found {_show(resolved)}")
        return Param(name=name, type="categorical", choices=tuple(resolved), when=when)

    if name in _CATEGORICAL:
        raise _fail(where, f"{key}.type", f"must be 'categorical' for {name}; found {_show(ptype)}")
    kind = _NUMERIC[name][0]
    if ptype != kind:
        raise _fail(where, f"{key}.type", f"must be {_show(kind)} for {name}; found {_show(ptype)}")
    if "choices" in spec:
        raise _fail(where, key, "'choices' applies to categorical parameters only; use low/high")
    for k in ("low", "high"):
        if k not in spec:
            raise _fail(where, key, f"a numeric parameter needs 'low' and 'high'; {_show(k)} is missing")
    low = _number(where, f"{key}.low", _resolve(where, f"{key}.low", spec["low"], resolve), kind)
    high = _number(where, f"{key}.high", _resolve(where, f"{key}.high", spec["high"], resolve), kind)
    log = spec.get("log", False)
    if not isinstance(log, bool):
        raise _fail(where, f"{key}.log", f"must be true or false; found {_show(log)}")
    step = spec.get("step")
    if low > high:
        raise _fail(where, key, f"'low' ({low}) must be <= 'high' ({high})")
    knob = get_knob(name)
    if not (knob.is_valid(kind == "int" and int(low) or low) and knob.is_valid(kind == "int" and int(high) or high)):
        raise _fail(where, key, f"must lie within {_limits(name)}; found [{low:g}, {high:g}]")
    if log and low <= 0:
        raise _fail(where, f"{key}.low", f"must be > 0 when 'log' is true; found {low}")
    if step is not None:
        if log:
            raise _fail(where, key, "'step' and 'log: true' cannot be combined; drop one")
        step = _number(where, f"{key}.step", _resolve(where, f"{key}.step", step, resolve), kind)
        if step <= 0:
            raise _fail(where, f"{key}.step", f"must be > 0; found {step}")
        n = (high - low) / step
        if abs(n - round(n)) > 1e-9 * max(1.0, abs(n)):
            raise _fail(where, f"{key}.step", f"must divide high - low ({high - low:g}); found {step:g}")
    return Param(name=name, type=kind, low=low, high=high, log=log, step=step, when=when)


def _check_value(where: str, key: str, name: str, value: Any) -> None:
    if name in _CATEGORICAL:
        allowed = _CATEGORICAL[name]
        if not any(_same(value, a) for a in allowed):
            raise _fail(where, key, f"accepted values are {', '.join(map(str, allowed))}; found {_show(value)}")
        return
    kind = _NUMERIC[name][0]
    number = _number(where, key, value, kind)
    if not get_knob(name).is_valid(number):
        raise _fail(where, key, f"must lie within {_limits(name)}; found {_show(value)}")


def _limits(name: str) -> str:
    knob = get_knob(name)
    return f"{'(' if knob.low_open else '['}{knob.low:g}, {knob.high:g}]"


def _parse_when(
    where: str, key: str, when: Any, earlier: Sequence[Param]
) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    if when is None:
        return ()
    if not isinstance(when, dict) or not when:
        raise _fail(where, f"{key}.when", f"must be a mapping like {{optimizer: [momentum]}}; found {_show(when)}")
    by_name = {p.name: p for p in earlier}
    out = []
    for ref, values in when.items():
        if ref not in by_name:
            raise _fail(where, f"{key}.when", f"refers to {_show(ref)}, which is not a parameter defined above; "
                        f"accepted: {', '.join(by_name) or 'none'}")
        values = values if isinstance(values, list) else [values]
        if not values:
            raise _fail(where, f"{key}.when.{ref}", "must list at least one value")
        for v in values:
            if not by_name[ref].contains(v):
                accepted = (", ".join(map(str, by_name[ref].choices)) if by_name[ref].type == "categorical"
                            else f"[{by_name[ref].low}, {by_name[ref].high}]")
                raise _fail(where, f"{key}.when.{ref}", f"accepted values are {accepted}; found {_show(v)}")
        out.append((str(ref), tuple(values)))
    return tuple(out)


def _parse_fixed(
    where: str, name: Any, value: Any, framework: str, target: str, resolve: Mapping[str, int]
) -> Any:
    key = f"fixed.{_name(name)}"
    if name not in FIXED_NAMES:
        extra = " ('seed' comes from --seed)" if name == "seed" else ""
        raise _fail(where, key, f"unknown field; accepted: {', '.join(FIXED_NAMES)}{extra}")
    _check_applies(where, key, name, framework, target)
    value = _resolve(where, key, value, resolve)
    if name == "device":
        if not (value in ("cpu", "cuda") or (isinstance(value, str) and value.startswith("cuda:")
                                              and value[5:].isdigit())):
            raise _fail(where, key, f"accepted values are cpu, cuda, cuda:<index>; found {_show(value)}")
        return value
    _check_value(where, key, name, value)
    return value


# ------------------------------------------------------------------------------ combined space


def combined_space(
    frameworks: Sequence[str], target: str, *, cores: int | None = None
) -> SearchSpace:
    """The union of several frameworks' built-in spaces for one target (``--framework any``).

    The framework becomes a categorical parameter named ``framework``; every parameter of
    framework ``f`` is renamed ``f.<param>`` and made conditional on ``framework == f`` (its own
    conditions are renamed too). :meth:`SearchSpace.to_config` strips the prefix again.

    Args:
        frameworks: Frameworks to combine; each needs a built-in ``<framework>-<target>`` space.
        target: ``cpu`` or ``gpu``.
        cores: Cores available to the study.

    Raises:
        SearchSpaceError: When a framework has no built-in space for the target.
    """
    if target not in TARGETS:
        raise SearchSpaceError(f"The 'target' parameter of combined_space must be one of "
                               f"{', '.join(TARGETS)}. Got {_show(target)} instead.")
    frameworks = list(dict.fromkeys(frameworks))
    if not frameworks:
        raise SearchSpaceError("The 'frameworks' parameter of combined_space must name at least one "
                               "framework. Got [] instead.")
    available = set(list_spaces())
    params = [Param(name="framework", type="categorical", choices=tuple(frameworks))]
    fixed: dict[str, Any] = {}
    for fw in frameworks:
        if f"{fw}-{target}" not in available:
            raise SearchSpaceError(f"No built-in search space {fw}-{target}: choose frameworks among "
                                   f"{', '.join(sorted(s.rsplit('-', 1)[0] for s in available if s.endswith(target)))}.")
        space = load_space(f"{fw}-{target}", cores=cores)
        for p in space.params:
            when = (("framework", (fw,)),) + tuple((f"{fw}.{k}", v) for k, v in p.when)
            params.append(replace(p, name=f"{fw}.{p.name}", when=when))
        fixed.update({f"{fw}.{k}": v for k, v in space.fixed.items()})
    return SearchSpace(
        name=f"any-{target}", framework="any", target=target, params=tuple(params), fixed=fixed,
        source="combined:" + ",".join(frameworks),
        description=f"Union of the {', '.join(frameworks)} {target} spaces; the framework is a parameter.",
        document={"combined": {"frameworks": frameworks, "target": target}},
    )
