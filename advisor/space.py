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

import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from advisor._space._params import Param, SearchSpace
from advisor._space._show import show
from advisor._space._validate import read_yaml, validate_document
from advisor.errors import SearchSpaceError
from advisor.knobs import TARGETS

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


# ----------------------------------------------------------------------------------- loading


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
                f"Unknown search space {show(text)}: choose one of {', '.join(list_spaces())} or give a .yaml file."
            )
    where = path.name
    document = read_yaml(path, where)
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
    return validate_document(
        document, name=name, where=where or f"{name}.yaml", source=source,
        cores=cores if cores is not None else available_cores(),
    )


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
                               f"{', '.join(TARGETS)}. Got {show(target)} instead.")
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
