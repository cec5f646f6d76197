"""Reading and validating a search-space YAML file, one line per error.

Every check names the file and the dotted key, what is accepted and what was found. The limits
below keep a hostile file (huge, deeply nested, "billion laughs" aliases, enormous integers) from
costing more than a small one. The knobs' types, bounds and choices come from :mod:`advisor.knobs`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from advisor._space._params import Param, SearchSpace, same
from advisor._space._show import MAX_SHOWN, fail, key_name, show
from advisor.errors import SearchSpaceError
from advisor.knobs import FRAMEWORK_INFO, FRAMEWORKS, KNOBS, TARGETS, get_knob, knob_applies

__all__ = ["read_yaml", "validate_document"]

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


def read_yaml(path: Path, where: str) -> Any:
    """Parse the file with ``yaml.safe_load``; ``where`` names it in errors."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise SearchSpaceError(f"{where}: cannot read the file ({exc.strerror or exc})") from None
    if size > MAX_FILE_BYTES:
        raise fail(where, "", f"the file must be at most {MAX_FILE_BYTES:,} bytes; found {size:,} bytes")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SearchSpaceError(f"{where}: cannot read the file as UTF-8 text ({exc})") from None
    try:
        return yaml.safe_load(text)
    except RecursionError:
        raise fail(where, "", f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # a constructor's own check: an int past Python's digit limit, a bad date
        raise fail(where, "", f"a value cannot be read: {' '.join(str(exc).split())[:MAX_SHOWN]}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        line = f" (line {mark.line + 1})" if mark is not None else ""
        problem = " ".join(str(problem).split())
        raise fail(where, "", f"not a plain YAML mapping: {problem}{line}") from None


def validate_document(
    document: Any, *, name: str, where: str, source: str, cores: int
) -> SearchSpace:
    """Validate a parsed search-space mapping and resolve its placeholders with ``cores``.

    Raises:
        SearchSpaceError: When anything is invalid.
    """
    if _depth(document, {}) > MAX_DEPTH:
        raise fail(where, "", f"nested deeper than {MAX_DEPTH} levels")
    if not isinstance(document, dict):
        raise fail(where, "", f"the file must be a mapping with keys {', '.join(TOP_LEVEL_KEYS)}; "
                   f"found {type(document).__name__}")
    for key in document:
        if key not in TOP_LEVEL_KEYS:
            raise fail(where, "", f"unknown top-level key {show(key)}; accepted: {', '.join(TOP_LEVEL_KEYS)}")
    framework = document.get("framework")
    if framework not in FRAMEWORKS:
        raise fail(where, "framework", f"must be one of {', '.join(FRAMEWORKS)}; found {show(framework)}")
    target = document.get("target")
    if target not in TARGETS:
        raise fail(where, "target", f"must be one of {', '.join(TARGETS)}; found {show(target)}")
    description = document.get("description", "")
    if not isinstance(description, str):
        raise fail(where, "description", f"must be text; found {type(description).__name__}")
    ncores = max(1, int(cores))
    resolve = {"${cores}": ncores, "${cores_half}": max(1, ncores // 2)}

    raw_params = document.get("params")
    if not isinstance(raw_params, dict) or not raw_params:
        raise fail(where, "params", f"must be a non-empty mapping of parameter names; found {show(raw_params)}")
    if len(raw_params) > MAX_PARAMS:
        raise fail(where, "params", f"at most {MAX_PARAMS} parameters are accepted; found {len(raw_params)}")
    params: list[Param] = []
    for pname, spec in raw_params.items():
        params.append(_parse_param(where, pname, spec, framework, target, resolve, params))

    raw_fixed = document.get("fixed") or {}
    if not isinstance(raw_fixed, dict):
        raise fail(where, "fixed", f"must be a mapping of Config fields to values; found {show(raw_fixed)}")
    fixed: dict[str, Any] = {}
    for fname, value in raw_fixed.items():
        fixed[fname] = _parse_fixed(where, fname, value, framework, target, resolve)
        if any(p.name == fname for p in params):
            raise fail(where, f"fixed.{fname}", "is also under params; a field is either searched or fixed")
    space = SearchSpace(
        name=name, framework=framework, target=target, params=tuple(params), fixed=fixed,
        source=source, description=description.strip(), document=document,
    )
    _check_consistency(where, space)
    return space


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


def _check_consistency(where: str, space: SearchSpace) -> None:
    names = {p.name for p in space.params}
    if "optimizer" in names:
        opts = space.param("optimizer").choices
    else:
        opts = (space.fixed.get("optimizer", "sgd"),)
    if "momentum" in opts and "momentum" not in names and not space.fixed.get("momentum"):
        raise fail(where, "params.optimizer", "offers 'momentum', so a 'momentum' parameter (or a fixed "
                   "momentum > 0) is needed; found none")
    offered = FRAMEWORK_INFO[space.framework].optimizers
    for opt in opts:
        if opt not in offered:
            raise fail(where, "params.optimizer", f"{space.framework} accepts {', '.join(offered)} only; "
                       f"found {show(opt)}")
    device = space.fixed.get("device", "cuda" if space.target == "gpu" else "cpu")
    if (space.target == "gpu") != str(device).startswith("cuda"):
        raise fail(where, "fixed.device", f"must match target {show(space.target)}; found {show(device)}")
    # Every extreme corner must build a valid Config: catches e.g. a fixed momentum with sgd.
    probe: dict[str, Any] = {}
    for p in space.params:
        if p.is_active(probe):
            probe[p.name] = p.choices[0] if p.type == "categorical" else p.low
    try:
        space.to_config(probe)
    except (ValueError, TypeError) as exc:
        raise fail(where, "", f"does not build a valid Config: {exc}") from None


def _resolve(where: str, key: str, value: Any, resolve: Mapping[str, int]) -> Any:
    if isinstance(value, str) and "${" in value:
        if value not in resolve:
            raise fail(where, key, f"unknown placeholder {show(value)}; accepted: {', '.join(PLACEHOLDERS)}")
        return resolve[value]
    return value


def _number(where: str, key: str, value: Any, kind: str) -> float:
    if isinstance(value, str):
        hint = " (write 1.0e-4, not 1e-4: YAML reads the latter as text)" if "e" in value.lower() else ""
        raise fail(where, key, f"must be a number; found the text {show(value)}{hint}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise fail(where, key, f"must be a number; found {show(value)}")
    if isinstance(value, int) and not -MAX_INT <= value <= MAX_INT:  # float() of it would overflow
        digits = int(value.bit_length() * math.log10(2)) + 1
        raise fail(where, key, f"must be a number of at most {MAX_INT:.0e} in magnitude; found an integer "
                   f"of about {digits:,} digits")
    if not math.isfinite(value):
        raise fail(where, key, f"must be a finite number; found {show(value)}")
    if kind == "int" and not (isinstance(value, int) or float(value).is_integer()):
        raise fail(where, key, f"must be an integer; found {show(value)}")
    return int(value) if kind == "int" else float(value)


def _check_applies(where: str, key: str, name: str, framework: str, target: str) -> None:
    knob = get_knob(name)
    if not knob_applies(knob, framework):
        raise fail(where, key, f"applies to {', '.join(knob.frameworks or ())} only; found in a {framework} space")
    if not knob_applies(knob, framework, target):
        raise fail(where, key, f"applies to {', '.join(knob.targets)} spaces only; found in a {target} space")


def _parse_param(
    where: str, name: Any, spec: Any, framework: str, target: str, resolve: Mapping[str, int],
    earlier: Sequence[Param],
) -> Param:
    key = f"params.{key_name(name)}"
    if name not in PARAM_NAMES:
        extra = " ('seed' comes from --seed; 'device' from the target)" if name in ("seed", "device") else ""
        raise fail(where, key, f"unknown parameter; accepted: {', '.join(PARAM_NAMES)}{extra}")
    _check_applies(where, key, name, framework, target)
    if not isinstance(spec, dict):
        raise fail(where, key, f"must be a mapping like {{type: int, low: 1, high: 8}}; found {show(spec)}")
    for k in spec:
        if k not in PARAM_KEYS:
            raise fail(where, key, f"unknown key {show(k)}; accepted: {', '.join(PARAM_KEYS)}")
    ptype = spec.get("type")
    if ptype not in TYPES:
        raise fail(where, f"{key}.type", f"must be one of {', '.join(TYPES)}; found {show(ptype)}")
    when = _parse_when(where, key, spec.get("when"), earlier)

    if ptype == "categorical":
        for k in ("low", "high", "log", "step"):
            if k in spec:
                raise fail(where, key, f"{show(k)} does not apply to a categorical parameter; use 'choices' only")
        choices = spec.get("choices")
        if not isinstance(choices, list) or not choices:
            raise fail(where, f"{key}.choices", f"must be a non-empty list; found {show(choices)}")
        if len(choices) > MAX_CHOICES:
            raise fail(where, f"{key}.choices", f"at most {MAX_CHOICES} choices; found {len(choices)}")
        resolved = [_resolve(where, f"{key}.choices", c, resolve) for c in choices]
        for c in resolved:
            _check_value(where, f"{key}.choices", name, c)
        if len({(type(c), c) for c in resolved}) != len(resolved):
            raise fail(where, f"{key}.choices", f"must not repeat a value; found {show(resolved)}")
        return Param(name=name, type="categorical", choices=tuple(resolved), when=when)

    if name in _CATEGORICAL:
        raise fail(where, f"{key}.type", f"must be 'categorical' for {name}; found {show(ptype)}")
    kind = _NUMERIC[name][0]
    if ptype != kind:
        raise fail(where, f"{key}.type", f"must be {show(kind)} for {name}; found {show(ptype)}")
    if "choices" in spec:
        raise fail(where, key, "'choices' applies to categorical parameters only; use low/high")
    for k in ("low", "high"):
        if k not in spec:
            raise fail(where, key, f"a numeric parameter needs 'low' and 'high'; {show(k)} is missing")
    low = _number(where, f"{key}.low", _resolve(where, f"{key}.low", spec["low"], resolve), kind)
    high = _number(where, f"{key}.high", _resolve(where, f"{key}.high", spec["high"], resolve), kind)
    log = spec.get("log", False)
    if not isinstance(log, bool):
        raise fail(where, f"{key}.log", f"must be true or false; found {show(log)}")
    step = spec.get("step")
    if low > high:
        raise fail(where, key, f"'low' ({low}) must be <= 'high' ({high})")
    knob = get_knob(name)
    if not (knob.is_valid(kind == "int" and int(low) or low) and knob.is_valid(kind == "int" and int(high) or high)):
        raise fail(where, key, f"must lie within {_limits(name)}; found [{low:g}, {high:g}]")
    if log and low <= 0:
        raise fail(where, f"{key}.low", f"must be > 0 when 'log' is true; found {low}")
    if step is not None:
        if log:
            raise fail(where, key, "'step' and 'log: true' cannot be combined; drop one")
        step = _number(where, f"{key}.step", _resolve(where, f"{key}.step", step, resolve), kind)
        if step <= 0:
            raise fail(where, f"{key}.step", f"must be > 0; found {step}")
        n = (high - low) / step
        if abs(n - round(n)) > 1e-9 * max(1.0, abs(n)):
            raise fail(where, f"{key}.step", f"must divide high - low ({high - low:g}); found {step:g}")
    return Param(name=name, type=kind, low=low, high=high, log=log, step=step, when=when)


def _check_value(where: str, key: str, name: str, value: Any) -> None:
    if name in _CATEGORICAL:
        allowed = _CATEGORICAL[name]
        if not any(same(value, a) for a in allowed):
            raise fail(where, key, f"accepted values are {', '.join(map(str, allowed))}; found {show(value)}")
        return
    kind = _NUMERIC[name][0]
    number = _number(where, key, value, kind)
    if not get_knob(name).is_valid(number):
        raise fail(where, key, f"must lie within {_limits(name)}; found {show(value)}")


def _limits(name: str) -> str:
    knob = get_knob(name)
    return f"{'(' if knob.low_open else '['}{knob.low:g}, {knob.high:g}]"


def _parse_when(
    where: str, key: str, when: Any, earlier: Sequence[Param]
) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    if when is None:
        return ()
    if not isinstance(when, dict) or not when:
        raise fail(where, f"{key}.when", f"must be a mapping like {{optimizer: [momentum]}}; found {show(when)}")
    by_name = {p.name: p for p in earlier}
    out = []
    for ref, values in when.items():
        if ref not in by_name:
            raise fail(where, f"{key}.when", f"refers to {show(ref)}, which is not a parameter defined above; "
                       f"accepted: {', '.join(by_name) or 'none'}")
        values = values if isinstance(values, list) else [values]
        if not values:
            raise fail(where, f"{key}.when.{ref}", "must list at least one value")
        for v in values:
            if not by_name[ref].contains(v):
                accepted = (", ".join(map(str, by_name[ref].choices)) if by_name[ref].type == "categorical"
                            else f"[{by_name[ref].low}, {by_name[ref].high}]")
                raise fail(where, f"{key}.when.{ref}", f"accepted values are {accepted}; found {show(v)}")
        out.append((str(ref), tuple(values)))
    return tuple(out)


def _parse_fixed(
    where: str, name: Any, value: Any, framework: str, target: str, resolve: Mapping[str, int]
) -> Any:
    key = f"fixed.{key_name(name)}"
    if name not in FIXED_NAMES:
        extra = " ('seed' comes from --seed)" if name == "seed" else ""
        raise fail(where, key, f"unknown field; accepted: {', '.join(FIXED_NAMES)}{extra}")
    _check_applies(where, key, name, framework, target)
    value = _resolve(where, key, value, resolve)
    if name == "device":
        if not (value in ("cpu", "cuda") or (isinstance(value, str) and value.startswith("cuda:")
                                              and value[5:].isdigit())):
            raise fail(where, key, f"accepted values are cpu, cuda, cuda:<index>; found {show(value)}")
        return value
    _check_value(where, key, name, value)
    return value
