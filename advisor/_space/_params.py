"""The search-space records: a parameter's domain and the validated space that builds Configs."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Collection, Mapping

import numpy as np

from advisor._space._show import show
from advisor.errors import SearchSpaceError
from advisor.records import Config

__all__ = ["Param", "SearchSpace", "same"]


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
            return any(same(value, c) for c in self.choices)
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


def same(a: Any, b: Any) -> bool:
    """``a == b``, except that a boolean equals only a boolean."""
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
                    f"found {show(framework)}"
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
