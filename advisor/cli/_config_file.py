"""``--config FILE`` of ``measure`` and ``tune``: run or queue a recommendation's pick as it is.

A file holds JSON in one of four shapes, told apart by their keys:
- a recommendation (``advisor recommend --json``: ``choices``): every choice, best first;
- one choice of a recommendation (``config`` and ``rank``);
- a trial result (``advisor measure --json``: ``config`` and ``workload``);
- a config (``framework`` and knob values, as ``Config.to_dict()`` writes it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from advisor.errors import InvalidParameterError
from advisor.records import Config

__all__ = ["ConfigEntry", "read_config_file", "params_for_space"]


@dataclass(frozen=True)
class ConfigEntry:
    """One config of a ``--config`` file, with the workload the file names (if it names one)."""

    config: Config
    model: str | None = None
    dataset: str | None = None
    label: str = ""


def _bad(path: Path, why: str) -> InvalidParameterError:
    return InvalidParameterError(f"--config {path}: {why}")


def _config(path: Path, data: Any, where: str) -> Config:
    if not isinstance(data, Mapping):
        raise _bad(path, f"{where} is not a JSON object")
    try:
        return Config.from_dict(data)  # validated: it is about to run
    except (TypeError, ValueError) as exc:
        raise _bad(path, f"{where}: {exc}") from None


def read_config_file(path: Path) -> list[ConfigEntry]:
    """Read the configs of a ``--config`` file, best first.

    Raises:
        InvalidParameterError: When the file is missing, not JSON, of no known shape, or holds a
            config that today's rules refuse (one line naming the file).
    """
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise _bad(path, "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _bad(path, f"cannot be read ({exc.__class__.__name__})") from None
    except json.JSONDecodeError as exc:
        raise _bad(path, f"not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, Mapping):
        raise _bad(path, "expected a JSON object (a recommendation, a choice, a trial result or a config)")
    if "choices" in data:  # advisor recommend --json
        dataset = (data.get("workload") or {}).get("dataset")
        entries = [ConfigEntry(_config(path, c.get("config"), f"choice {c.get('rank', i + 1)}"), c.get("model"),
                               dataset, f"choice {c.get('rank', i + 1)}")
                   for i, c in enumerate(data["choices"]) if isinstance(c, Mapping)]
        if not entries:
            raise _bad(path, "the recommendation has no choices")
        return entries
    if "config" in data and "workload" in data:  # a trial result
        w = data["workload"] if isinstance(data["workload"], Mapping) else {}
        return [ConfigEntry(_config(path, data["config"], "config"), w.get("model"), w.get("dataset"), "trial")]
    if "config" in data:  # one choice
        return [ConfigEntry(_config(path, data["config"], "config"), data.get("model"), None, "choice")]
    if "framework" in data:
        return [ConfigEntry(_config(path, data, "the config"), None, None, "config")]
    raise _bad(path, "expected a recommendation (choices), a choice or trial result (config), "
                     "or a config (framework and knobs)")


def params_for_space(config: Config, space: Any) -> tuple[dict[str, Any], list[str]]:
    """The point of ``space`` that is ``config``, for ``study.enqueue_trial``.

    Returns:
        The parameter values (active parameters only, ``framework.knob`` names in a combined
        space) and notes on what the trial will run differently: a fixed value of the space that
        differs from the config's (the space's wins), or a knob the space neither searches nor
        fixes (it runs at its default).

    Raises:
        InvalidParameterError: When the space cannot produce the config's framework, or a value
            lies outside a searched parameter's domain (the study would skip the point).
    """
    if config.framework not in space.frameworks:
        raise InvalidParameterError(
            f"--config: a {config.framework} config cannot be queued in space {space.name} "
            f"({', '.join(space.frameworks)})")
    combined = space.framework == "any"
    prefix = f"{config.framework}." if combined else ""
    values = config.to_dict()
    chosen: dict[str, Any] = {"framework": config.framework} if combined else {}
    notes: list[str] = []
    for p in space.params:
        if p.name == "framework" or not p.is_active(chosen):
            continue
        if combined and not p.name.startswith(prefix):
            continue
        knob = p.name.rsplit(".", 1)[-1]
        value = values[knob]
        if value is None:
            continue
        if not p.contains(value):
            raise InvalidParameterError(
                f"--config: {knob}={value} lies outside space {space.name}'s domain for {p.name} "
                f"({p.to_dict()}); run it as it is with advisor measure --config, or give a --space that holds it")
        chosen[p.name] = value
    fixed = {name.rsplit(".", 1)[-1]: v for name, v in space.fixed.items() if not combined or name.startswith(prefix)}
    searched = {name.rsplit(".", 1)[-1] for name in chosen}
    default = Config(framework=config.framework).to_dict()
    for knob, value in values.items():
        if knob in ("framework", "seed", "device") or knob in searched:
            continue
        if knob in fixed:
            if fixed[knob] != value:
                notes.append(f"the space fixes {knob}={fixed[knob]}; the config's {knob}={value} is not used")
        elif value != default[knob]:
            notes.append(f"the space neither searches nor fixes {knob}: the trial runs {knob}={default[knob]}, "
                         f"not the config's {value}")
    return chosen, notes
