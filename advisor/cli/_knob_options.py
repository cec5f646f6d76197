"""CLI options derived from the knob declarations (:mod:`advisor.knobs`).

:func:`knob_options` adds one option per knob to a command: ``--<flag>`` (and ``--<name>`` with
dashes when that differs), typed from the knob, ``--x/--no-x`` for switches, every default
``None`` ("not given"), so the command can tell what the user set. The command receives them
together as ``knobs: dict[str, Any]`` holding only the knobs that were given.
"""

from __future__ import annotations

import functools
import inspect
from typing import Annotated, Any, Callable, Optional, TypeVar

import typer

from advisor.knobs import KNOBS, Knob

__all__ = ["knob_options", "knob_flag"]

F = TypeVar("F", bound=Callable[..., Any])
_TYPES: dict[str, Any] = {"int": int, "float": float, "bool": bool, "choice": str, "str": str}


def knob_flag(knob: Knob) -> str:
    """The knob's main CLI flag."""
    return knob.flag or "--" + knob.name.replace("_", "-")


def _flags(knob: Knob) -> list[str]:
    names = list(dict.fromkeys([knob_flag(knob), "--" + knob.name.replace("_", "-")]))
    if knob.type == "bool":
        return ["/".join([names[0], "--no-" + names[0][2:]])]
    return names


def _help(knob: Knob, default: str | None) -> str:
    text = knob.help
    if knob.type == "choice":
        text += " Choices: " + ", ".join(map(str, knob.choices)) + "."
    if knob.frameworks is not None:
        text += f" [{', '.join(knob.frameworks)} only]"
    if default is None and knob.default is not None and knob.type != "str":
        default = str(knob.default).lower() if knob.type == "bool" else str(knob.default)
    return text + (f" Default: {default}." if default else "")


def _parameter(knob: Knob, default: str | None) -> inspect.Parameter:
    option = typer.Option(*_flags(knob), help=_help(knob, default), show_default=False)
    return inspect.Parameter(knob.name, inspect.Parameter.KEYWORD_ONLY, default=None,
                             annotation=Annotated[Optional[_TYPES[knob.type]], option])


def knob_options(*, exclude: tuple[str, ...] = (), defaults: dict[str, str] | None = None) -> Callable[[F], F]:
    """Decorate a command taking ``knobs: dict[str, Any]`` with one option per knob.

    Args:
        exclude: Knobs the command does not offer.
        defaults: The command's own default of a knob, as shown in ``--help``, where it is not
            the declared one.
    """
    shown = defaults or {}
    chosen = [k for k in KNOBS if k.name not in exclude]
    names = {k.name for k in chosen}

    def decorate(func: F) -> F:
        signature = inspect.signature(func, eval_str=True)
        own = [p for name, p in signature.parameters.items() if name != "knobs"]

        @functools.wraps(func)
        def wrapper(**kwargs: Any) -> Any:
            given = {name: kwargs.pop(name) for name in list(kwargs) if name in names}
            return func(**kwargs, knobs={k: v for k, v in given.items() if v is not None})

        params = own + [_parameter(k, shown.get(k.name)) for k in chosen]
        wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        return wrapper  # type: ignore[return-value]

    return decorate
