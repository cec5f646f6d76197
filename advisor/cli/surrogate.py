"""``advisor surrogate``: fit the LightGBM surrogate on a knowledge base, and measure its quality."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from advisor.cli import app
from advisor.cli._common import err, out, print_json, user_errors

surrogate_app = typer.Typer(
    help=(
        "Fit and evaluate the surrogate that predicts time, accuracy and memory.\n\n"
        "Example: advisor surrogate fit --table surrogate/knowledge.csv.gz --out surrogate/model"
    ),
    no_args_is_help=True,
)
app.add_typer(surrogate_app, name="surrogate")

TableOption = Annotated[Optional[Path], typer.Option(
    "--table", help="Knowledge-base table (.csv.gz). Default: the shipped one.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
RoundsOption = Annotated[int, typer.Option("--rounds", min=10, max=5000, help="Boosting rounds per model.")]
ThreadsOption = Annotated[int, typer.Option("--threads", min=1, max=64, help="LightGBM threads (1 is reproducible).")]


def _table_path(table: Path | None) -> Path:
    from advisor.surrogate.io import shipped_table

    return table if table is not None else shipped_table()


@surrogate_app.command("fit")
@user_errors
def fit_command(
    table: TableOption = None,
    out_dir: Annotated[Optional[Path], typer.Option(
        "--out", help="Model folder to write. Default: the shipped model folder.")] = None,
    rounds: RoundsOption = 150,
    threads: ThreadsOption = 1,
    seed: Annotated[int, typer.Option("--seed", min=0, help="LightGBM seed.")] = 0,
    as_json: JsonOption = False,
) -> None:
    """Fit the quantile models (10/50/90%) for time, accuracy and memory and save them as text.

    Example: advisor surrogate fit --table kb.csv.gz --out model/ --json
    """
    from advisor.surrogate.io import fit_file, save, shipped_model_dir

    path = _table_path(table)
    target = out_dir if out_dir is not None else shipped_model_dir()
    model = fit_file(path, seed=seed, num_threads=threads, num_boost_round=rounds,
                     on_progress=lambda line: err.print(line + " ..."))
    meta_path = save(model, target, table_path=path)
    from advisor import knowledge
    from advisor._recommend._portfolio import build_portfolio, save_portfolio

    err.print("Building the recipe portfolio ...")
    portfolio = build_portfolio(knowledge.read(path), model, device_kind="cpu")
    save_portfolio(target, {"cpu": portfolio}, table_sha256=model.meta["table_sha256"])
    result = {"table": str(path), "out": str(target), "meta": str(meta_path), "row_counts": model.meta["row_counts"],
              "table_sha256": model.meta["table_sha256"], "portfolio": len(portfolio)}
    if as_json:
        print_json(result)
        return
    counts = ", ".join(f"{k}: {v} rows" for k, v in model.meta["row_counts"].items())
    out.print(f"Saved the surrogate to {target} ({counts}) and a portfolio of {len(portfolio)} recipes.")


def _fmt(value: float | None, pct: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{100 * value:.1f}%" if pct else f"{value:.3f}"


@surrogate_app.command("evaluate")
@user_errors
def evaluate_command(
    table: TableOption = None,
    rounds: RoundsOption = 150,
    threads: ThreadsOption = 1,
    card: Annotated[Optional[Path], typer.Option(
        "--card", help="Also write the model card (Markdown) here, e.g. surrogate/MODEL_CARD.md.")] = None,
    scheme: Annotated[Optional[str], typer.Option(
        "--scheme", help="Comma-separated schemes to run (default: all): leave-one-dataset-out, "
                         "leave-one-train-size-out, leave-one-hardware-out, random-5-fold.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Grouped cross-validation: leave one dataset / training size / hardware target out, random 5-fold.

    Each held-out group is also scored alone (--json: by_group), so a pooled figure cannot hide one.

    Example: advisor surrogate evaluate --table kb.csv.gz --card surrogate/MODEL_CARD.md

    Example: advisor surrogate evaluate --scheme leave-one-dataset-out --threads 2 --json
    """
    from advisor import knowledge
    from advisor.errors import invalid_parameter
    from advisor.surrogate.evaluate import SCHEMES, evaluate, model_card, training_meta

    schemes = SCHEMES if scheme is None else tuple(s.strip() for s in scheme.split(",") if s.strip())
    if not schemes or any(s not in SCHEMES for s in schemes):
        raise invalid_parameter("--scheme", "advisor surrogate evaluate", f"a comma-separated list of {', '.join(SCHEMES)}",
                                scheme)
    path = _table_path(table)
    kb = knowledge.read(path)
    err.print(f"Cross-validating on {path} ({len(kb)} trials) ...")
    result = evaluate(kb.columns, table=str(path), schemes=schemes, num_threads=threads, num_boost_round=rounds,
                      on_progress=lambda line: err.print("  " + line, highlight=False))
    if card is not None:
        model_card(result, meta=training_meta(kb.columns, table_path=path), summary=knowledge.summarize(kb), path=card)
        err.print(f"Wrote the model card to {card}.")
    if as_json:
        print_json(result.to_dict())
        return
    view = Table(title=f"Held-out quality on {path}", title_justify="left")
    for column in ("objective", "scheme", "folds", "rows", "Spearman", "MAPE", "MAE", "10-90% coverage"):
        view.add_column(column, justify="left" if column in ("objective", "scheme") else "right")
    for f in result.figures:
        view.add_row(f.objective, f.scheme, str(f.n_folds), str(f.n_rows), _fmt(f.spearman), _fmt(f.mape, True),
                     _fmt(f.mae), _fmt(f.coverage, True))
        for name, g in f.by_group.items():  # each held-out dataset, size or device alone
            view.add_row("", f"  {name} held out", "1", str(g["n_rows"]), _fmt(g["spearman"]), _fmt(g["mape"], True),
                         _fmt(g["mae"]), _fmt(g["coverage"], True), style="dim")
    out.print(view)
    tta = result.time_to_accuracy
    if tta:
        out.print(f"time to accuracy, leave-one-dataset-out: median error {100 * tta['median_error']:.1f}% over "
                  f"{tta['curves']} held-out full-size curves ({tta['misses']} never reached on the predicted curve; "
                  f"{100 * tta['median_error_shape']:.1f}% for the curve's shape)")
    for line in result.skipped:
        err.print(f"not evaluated: {line}")
