"""The portfolio's measured matrix: recipes measured on every full-size dataset against the obvious
default, the record each carries, and the robust choice it makes on a dataset the table lacks."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from advisor import knowledge
from advisor import recommend as rc
from advisor import surrogate as sg
from advisor._recommend._portfolio import (
    MATRIX_STUDY, build_portfolio, default_recipe, full_size_workloads, load_portfolio, matrix_recipes,
    measured_matrix, offered_on, recipe_key, save_portfolio, transfer_probability,
)
from advisor._recommend._portfolio import _recipe
from advisor.knowledge import row_from_result
from advisor.records import Config, Workload

from _knowledge_rows import CPU_PROFILE, make_result, rows

ROUNDS = 60
DATASETS = ("cifar10", "digits", "mnist")


def _full(recipe: dict[str, Any]) -> dict[str, Any]:
    """A recipe as the matrix stores it: every knob (no run length, threads or seed), and the model."""
    params = {k: v for k, v in recipe.items() if k != "model"}
    return _recipe(Config.from_dict({**params, "epochs": 1}).to_dict(), recipe["model"])


STRONG = _full({"framework": "torch", "optimizer": "momentum", "learning_rate": 0.6, "momentum": 0.9,
                "batch_size": 64, "schedule": "onecycle", "warmup_fraction": 0.2, "augment_flip": True,
                "model": "lenet5"})
WEAK = {**STRONG, "learning_rate": 0.2, "augment_flip": False}


def _matrix_row(recipe: dict[str, Any], dataset: str, accuracy: float, *, budget: float = 60.0,
                train_time: float = 55.0) -> dict[str, Any]:
    """TEST DATA: one constructed matrix trial of ``recipe`` (as offered on ``dataset``)."""
    here = offered_on(recipe, dataset)
    params = {k: v for k, v in here.items() if k != "model"}
    cfg = Config.from_dict({**params, "epochs": 60, "threads": 1, "seed": 0, "time_budget_s": budget})
    result = make_result(cfg, dataset, study=MATRIX_STUDY)
    result = dataclasses.replace(result, workload=Workload(dataset=dataset, model=here["model"]),
                                 test_accuracy=accuracy, best_accuracy=accuracy, train_time_s=train_time)
    return row_from_result(result, CPU_PROFILE)


def _matrix(default: dict[str, float], strong: dict[str, float], weak: dict[str, float]) -> list[dict[str, Any]]:
    """TEST DATA: the matrix, and a trial of STRONG and of WEAK outside it on each dataset (the
    table's most accurate within the budget, so the matrix takes them)."""
    out = []
    for d in default:
        out += [_matrix_row(default_recipe(d), d, default[d]), _matrix_row(STRONG, d, strong[d]),
                _matrix_row(WEAK, d, weak[d])]
        for recipe, acc in ((STRONG, 0.999), (WEAK, 0.998)):
            row = _matrix_row(recipe, d, acc, budget=0.0, train_time=1.0)
            out.append({**row, "study": "test-study"})
    return out


DEFAULT_ACC = {"cifar10": 0.60, "digits": 0.95, "mnist": 0.985}
STRONG_ACC = {"cifar10": 0.70, "digits": 0.975, "mnist": 0.992}
WEAK_ACC = {"cifar10": 0.65, "digits": 0.90, "mnist": 0.986}


def test_the_matrix_takes_each_full_size_workloads_best_recipes_within_the_budget() -> None:
    t = knowledge.Table.from_rows(rows(240, seed=3))
    full = full_size_workloads(t)
    assert set(full) <= set(DATASETS) and full
    for dataset, (size, idx) in full.items():
        assert size == max(int(s or 0) for d, s in zip(t["dataset_name"], t["train_samples"]) if d == dataset
                           and sum(1 for i in idx) >= 20)
    cols = t.columns
    times = sorted(cols["train_time_s"][i] for _, idx in full.values() for i in idx)
    budget = times[len(times) // 4]
    picked = matrix_recipes(t, budget_s=budget, per_workload=1)
    assert 1 <= len(picked) <= len(full)
    for r in picked:
        assert not {"epochs", "threads", "seed", "time_budget_s"} & set(r)
    # the first is the most accurate recipe within the budget on its workload
    best = {}
    for d, (_, idx) in full.items():
        within = [i for i in idx if cols["train_time_s"][i] <= budget]
        if within:
            i = max(within, key=lambda i: cols["test_accuracy"][i])
            cfg = knowledge.config_from_row({k: v[i] for k, v in cols.items()}).to_dict()
            best[d] = recipe_key({k: v for k, v in cfg.items() if k not in ("epochs", "threads", "seed",
                                  "inter_op_threads", "device", "mixed_precision", "cudnn_benchmark",
                                  "time_budget_s")} | {"model": cols["model"][i]})
    assert {recipe_key(r) for r in picked} <= set(best.values())


def test_measured_portfolio_records_wins_against_the_default_and_a_refused_knob_is_the_same_recipe() -> None:
    base = rows(240, seed=3)
    t = knowledge.Table.from_rows(base + _matrix(DEFAULT_ACC, STRONG_ACC, WEAK_ACC))
    recipes, accuracy, default = measured_matrix(t)
    assert default == pytest.approx(DEFAULT_ACC)
    # STRONG flips images; digits and MNIST refuse flips, so there it ran without: one recipe still
    assert accuracy[recipe_key(STRONG)] == pytest.approx(STRONG_ACC)
    portfolio = build_portfolio(t, None, size=1)  # the measured part alone fills a portfolio of one
    assert len(portfolio) == 1
    head = portfolio[0]
    assert {k: v for k, v in head.items() if k != "transfer"} == STRONG
    record = head["transfer"]
    assert (record["wins"], record["ties"], record["losses"]) == (3, 0, 0)
    assert record["workloads"] == sorted(DATASETS)
    assert transfer_probability(record) == pytest.approx(4 / 5)  # (3 + 0 + 1) / (3 + 2)
    # beating or tying counts; a loss does not; a record of ties alone is no reason to switch
    assert transfer_probability({**record, "wins": 1, "ties": 2}) == pytest.approx(4 / 5)
    assert transfer_probability({**record, "wins": 2, "ties": 0, "losses": 1}) == pytest.approx(3 / 5)
    assert transfer_probability({**record, "wins": 0, "ties": 3}) == 0.0
    assert transfer_probability(None) is None
    assert accuracy[recipe_key(WEAK)] == pytest.approx(WEAK_ACC)
    assert recipes[recipe_key(WEAK)] == WEAK
    # Holding a dataset out removes its column: two workloads left in the record
    held = build_portfolio(t, None, size=1, exclude_datasets=("cifar10",))[0]["transfer"]
    assert held["workloads"] == ["digits", "mnist"] and held["wins"] == 2


WIDE = {**STRONG, "model": "bn_cnn_w16", "learning_rate": 0.3}


def test_a_longer_budgets_matrix_adds_its_own_records_and_the_recipes_that_win_given_time() -> None:
    """Under 300 s the matrix is built from its 300 s runs alone: STRONG keeps its 60 s record and
    gains a 300 s one, WIDE (which only wins given time) joins with its 300 s record only, and a
    question takes the record of the longest budget within its bound."""
    from advisor._recommend._portfolio import matrix_budgets, record_for

    base = rows(240, seed=3) + _matrix(DEFAULT_ACC, STRONG_ACC, WEAK_ACC)
    long_default = {"cifar10": 0.68, "digits": 0.96, "mnist": 0.988}
    long_strong = {"cifar10": 0.72, "digits": 0.961, "mnist": 0.988}  # ties the default on two of three
    long_wide = {"cifar10": 0.80, "digits": 0.99, "mnist": 0.994}
    for d in DATASETS:
        base += [_matrix_row(default_recipe(d), d, long_default[d], budget=300.0, train_time=290.0),
                 _matrix_row(STRONG, d, long_strong[d], budget=300.0, train_time=290.0),
                 _matrix_row(WIDE, d, long_wide[d], budget=300.0, train_time=290.0),
                 # outside the matrix, WIDE is the table's best within 300 s but not within 60 s
                 {**_matrix_row(WIDE, d, 0.9995, budget=0.0, train_time=200.0), "study": "test-study"}]
    t = knowledge.Table.from_rows(base)
    assert matrix_budgets(t) == [60.0, 300.0]
    _, accuracy, default = measured_matrix(t)  # the base budget's runs alone, as before
    assert default == pytest.approx(DEFAULT_ACC) and recipe_key(WIDE) not in accuracy
    _, accuracy, default = measured_matrix(t, budget_s=300.0)
    assert default == pytest.approx(long_default) and accuracy[recipe_key(WIDE)] == pytest.approx(long_wide)

    portfolio = build_portfolio(t, None, size=2)
    bare = [{k: v for k, v in r.items() if k not in ("transfer", "transfers")} for r in portfolio]
    assert bare[0] == STRONG and WIDE in bare
    strong, wide = portfolio[0], portfolio[bare.index(WIDE)]
    assert [r["budget_s"] for r in strong["transfers"]] == [60.0, 300.0]
    assert strong["transfer"]["budget_s"] == 60.0 and (strong["transfer"]["wins"], strong["transfer"]["ties"]) == (3, 0)
    assert [r["budget_s"] for r in wide["transfers"]] == [300.0] and wide["transfers"][0]["wins"] == 3
    # which record speaks for a question
    assert record_for(strong, 30.0)["budget_s"] == 60.0  # the base budget speaks for shorter bounds, as before
    assert record_for(strong, 120.0)["budget_s"] == 60.0
    assert record_for(strong, 300.0)["budget_s"] == 300.0 and record_for(strong, None)["budget_s"] == 300.0
    assert (record_for(strong, 300.0)["wins"], record_for(strong, 300.0)["ties"]) == (1, 2)
    assert record_for(wide, 60.0) is None and record_for(wide, 600.0)["budget_s"] == 300.0
    assert record_for({**STRONG, "transfer": strong["transfer"]}, None)["budget_s"] == 60.0  # a portfolio of old
    assert record_for(STRONG, None) is None
    # the candidates carry the record of the question's bound
    from advisor._recommend._candidates import portfolio_candidates
    from advisor._recommend._workload import Target, describe_workload

    info = describe_workload("mnist")
    for bound, budget in ((60.0, 60.0), (300.0, 300.0), (None, 300.0)):
        cands = portfolio_candidates([strong], info, Target("cpu", 1), ["torch"], ["lenet5"], False, (), bound)
        assert cands and {c.transfer["budget_s"] for c in cands} == {budget}
    # a recipe that wins only given 300 s is not offered for a 60 s bound, and is for 300 s or none
    wide_on = [len(portfolio_candidates([wide], info, Target("cpu", 1), ["torch"], [WIDE["model"]], False, (), bound))
               for bound in (60.0, 300.0, None)]
    assert wide_on[0] == 0 and wide_on[1] > 0 and wide_on[2] > 0
    # joining at a longer budget displaces nothing of the base budget's portfolio
    assert build_portfolio(t, None, size=1)[0]["model"] == STRONG["model"] and len(build_portfolio(t, None, size=1)) == 2


def test_a_run_over_its_budget_counts_as_chance() -> None:
    t = knowledge.Table.from_rows(rows(120, seed=4) + [
        _matrix_row(default_recipe("mnist"), "mnist", 0.98),
        _matrix_row(STRONG, "mnist", 0.995, train_time=80.0),  # ran 80 s of a 60 s budget
    ])
    _, accuracy, _ = measured_matrix(t)
    assert accuracy[recipe_key(offered_on(STRONG, "mnist"))]["mnist"] == pytest.approx(0.1)


@pytest.fixture(scope="module")
def with_matrix(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """TEST DATA: constructed trials plus a constructed matrix, a model and its portfolio."""
    folder = tmp_path_factory.mktemp("matrix")
    table = folder / "knowledge.csv.gz"
    knowledge.write(rows(240, seed=11) + _matrix(DEFAULT_ACC, STRONG_ACC, WEAK_ACC), table)
    model = sg.fit_file(table, num_boost_round=ROUNDS)
    sg.save(model, folder / "model", table_path=table)
    # the measured part alone (a portfolio of one): the surrogate-filled recipes would compete on
    # predictions this constructed world makes exact
    save_portfolio(folder / "model", {"cpu": build_portfolio(knowledge.read(table), model, size=1)},
                   table_sha256=model.meta["table_sha256"])
    return table, folder / "model"


def _rec(where: tuple[Path, Path], dataset: str, **kwargs: Any) -> Any:
    kwargs.setdefault("profile", CPU_PROFILE)
    kwargs.setdefault("candidates_per_framework", 60)
    return rc.recommend(dataset, table=where[0], model_dir=where[1], **kwargs)


def test_a_recipe_that_beat_the_default_everywhere_is_the_robust_choice_on_a_new_dataset(
        with_matrix: tuple[Path, Path]) -> None:
    portfolio = load_portfolio(with_matrix[1], "cpu")
    assert portfolio[0]["transfer"]["wins"] == 3
    rec = _rec(with_matrix, "fashion-mnist", constraints=rc.Constraints(max_time_s=120.0), top=3)
    robust = [c for c in rec.choices if c.transfer is not None]
    assert robust and rec.baseline is not None
    first = rec.choices[0]
    assert first.source == "portfolio" and first.transfer is not None
    assert first.p_not_worse == pytest.approx(0.8)
    assert first.config["optimizer"] == "momentum" and first.config["schedule"] == "onecycle"
    assert "robust recipe" in rec.ranking and "3 other datasets" in rec.ranking
    assert rec.baseline is not None and rec.baseline.source == "default"  # still shown beside it
    data = rec.to_dict()
    assert data["choices"][0]["transfer"]["wins"] == 3


def test_the_robust_choice_does_not_override_measurements_of_the_workload(with_matrix: tuple[Path, Path]) -> None:
    """MNIST was measured (the constructed table and the matrix hold it): evidence first, and the
    record from other datasets does not reorder the answer."""
    rec = _rec(with_matrix, "mnist", constraints=rc.Constraints(max_time_s=120.0), top=3)
    assert "robust recipe" not in rec.ranking


def test_a_record_with_a_loss_is_not_enough_to_replace_the_default(tmp_path: Path,
                                                                    with_matrix: tuple[Path, Path]) -> None:
    """Three datasets and one loss: (2 + 0 + 1) / 5 = 60% < 80%, so the default keeps its place. The
    model and the candidates are those of the test above, only the record differs: the record is
    what put the recipe first there."""
    lost = {**STRONG_ACC, "digits": 0.90}
    table = tmp_path / "knowledge.csv.gz"
    knowledge.write(rows(240, seed=11) + _matrix(DEFAULT_ACC, lost, WEAK_ACC), table)
    model = sg.load(with_matrix[1])
    portfolio = build_portfolio(knowledge.read(table), model, size=1)
    assert all(transfer_probability(r.get("transfer")) is None or transfer_probability(r["transfer"]) < 0.8
               for r in portfolio)
    folder = tmp_path / "model"
    sg.save(model, folder, table_path=table)
    save_portfolio(folder, {"cpu": portfolio}, table_sha256=model.meta["table_sha256"])
    rec = _rec((table, folder), "fashion-mnist", constraints=rc.Constraints(max_time_s=120.0), top=3)
    assert "robust recipe" not in rec.ranking and rec.choices[0].source == "default"


def test_an_unsure_target_on_a_new_dataset_gets_the_robust_recipes_longest_run_stopping_at_it(
        with_matrix: tuple[Path, Path]) -> None:
    """A target no candidate is likely to reach on a dataset the table never measured: reaching it
    at all is what counts, so the robust recipe comes first (a random draw's predicted speed does
    not displace it), at the longest of its runs offered, and the run stops at the target."""
    free = _rec(with_matrix, "fashion-mnist", top=300)
    best = max(free.choices, key=lambda c: c.accuracy.mid)
    target = round(best.accuracy.mid + 0.5 * (best.accuracy.hi - best.accuracy.mid), 4)  # above every median
    rec = _rec(with_matrix, "fashion-mnist", constraints=rc.Constraints(min_accuracy=target), prefer="fast", top=300)
    first = rec.choices[0]
    assert first.transfer is not None and "robust recipe" in rec.ranking
    same = [c for c in rec.choices if c.transfer is not None and c.model == first.model
            and {**c.config, "epochs": 0} == {**first.config, "epochs": 0}]
    assert first.config["epochs"] == max(c.config["epochs"] for c in same) and len(same) > 1
    assert first.config["stop_at_accuracy"] == target


def test_with_no_confident_candidate_a_random_draw_needs_the_same_margin_over_a_trusted_one() -> None:
    import numpy as np

    from advisor._recommend._constraints import CONFIDENCE
    from advisor._recommend._rules import EXPLORATORY_CONFIDENCE, UNSURE_FLOOR, unsure_eligible

    margin = EXPLORATORY_CONFIDENCE - CONFIDENCE
    p = np.array([UNSURE_FLOOR - 0.02, UNSURE_FLOOR + 0.02, UNSURE_FLOOR + 0.02, UNSURE_FLOOR + margin + 0.02])
    trusted = np.array([True, True, False, False])
    assert unsure_eligible(p, trusted).tolist() == [False, True, False, True]


def test_where_reaching_a_target_is_in_doubt_the_robust_recipes_longest_run_goes_first() -> None:
    from advisor._recommend._baseline import obvious_default
    from advisor._recommend._candidates import Candidate
    from advisor._recommend._rules import robust_first
    from advisor._recommend._workload import Target

    target = Target("cpu", 1)
    record = {"wins": 3, "ties": 0, "losses": 0}
    recipe = {"optimizer": "momentum", "momentum": 0.9}
    cands = [Candidate(dataclasses.replace(obvious_default("torch", target, e), **recipe), "portfolio", None,
                       model="bn_cnn_w8", transfer=record) for e in (5, 30, 10)]
    beats = {0: 0.8, 1: 0.8, 2: 0.8}
    assert robust_first([0, 1, 2], cands, beats, longest=False) == [0, 1, 2]  # the ranking's order kept
    assert robust_first([0, 1, 2], cands, beats, longest=True) == [1, 2, 0]
    surer = {**beats, 0: 0.9}
    assert robust_first([0, 1, 2], cands, surer, longest=True)[0] == 0  # the record first, then the length
    # as for best shots, the longest run up to BEST_SHOT_MAX_EPOCHS: a 60-epoch schedule comes after
    longer = cands + [Candidate(dataclasses.replace(obvious_default("torch", target, 60), **recipe), "portfolio",
                                None, model="bn_cnn_w8", transfer=record)]
    assert robust_first([0, 1, 2, 3], longer, {**beats, 3: 0.8}, longest=True) == [1, 2, 0, 3]


def test_a_longer_schedule_that_costs_seconds_is_the_better_shot_at_a_target_in_doubt() -> None:
    """Past BEST_SHOT_MAX_EPOCHS a run is left to last only where it may take more than
    BEST_SHOT_CHEAP_S: on data whose epochs take a tenth of a second, 60 epochs go first."""
    from advisor._recommend._baseline import obvious_default
    from advisor._recommend._candidates import Candidate
    from advisor._recommend._rules import BEST_SHOT_CHEAP_S, past_cap, robust_first
    from advisor._recommend._workload import Target

    target = Target("cpu", 1)
    record = {"wins": 3, "ties": 0, "losses": 0}
    cands = [Candidate(dataclasses.replace(obvious_default("torch", target, e), optimizer="momentum", momentum=0.9),
                       "portfolio", None, model="bn_cnn_w8", transfer=record) for e in (10, 30, 60)]
    beats = {0: 0.8, 1: 0.8, 2: 0.8}
    fast = np.array([1.0, 3.0, 6.0])  # upper edges of the whole runs, seconds
    slow = fast * 30  # 60 epochs now take three minutes
    assert past_cap(cands, fast).tolist() == [False, False, False]
    assert past_cap(cands, slow).tolist() == [False, False, True]
    assert past_cap(cands, np.array([1.0, 3.0, BEST_SHOT_CHEAP_S])).tolist() == [False, False, False]
    assert robust_first([0, 1, 2], cands, beats, longest=True, past=past_cap(cands, fast)) == [2, 1, 0]
    assert robust_first([0, 1, 2], cands, beats, longest=True, past=past_cap(cands, slow)) == [1, 0, 2]
    # without a time in doubt, the order among equals is the ranking's
    assert robust_first([0, 1, 2], cands, beats, longest=False, past=past_cap(cands, fast)) == [0, 1, 2]


def test_robust_recipes_are_shown_beside_an_unsure_default_on_unmeasured_data() -> None:
    from advisor._recommend._baseline import obvious_default
    from advisor._recommend._candidates import Candidate
    from advisor._recommend._rules import robust_beside_default
    from advisor._recommend._workload import Target

    target = Target("cpu", 1)
    default = Candidate(obvious_default("torch", target, 10), "default", None, model="cifar_quick")
    robust = Candidate(dataclasses.replace(obvious_default("torch", target, 10), optimizer="momentum", momentum=0.9),
                       "portfolio", None, model="bn_cnn_w8")
    weak = Candidate(dataclasses.replace(obvious_default("torch", target, 10), learning_rate=0.01), "portfolio", None)
    draw = Candidate(dataclasses.replace(obvious_default("torch", target, 10), learning_rate=0.02), "torch-cpu", None)
    cands, p_not_worse = [default, robust, weak, draw], [None, 0.83, 0.5, None]
    shown = robust_beside_default(np.array([True, False, False, False]), cands, p_not_worse)
    assert shown.tolist() == [True, True, False, False]  # the robust record joins; a weak record or a draw does not
    # without the default among those shown, nothing is added
    assert robust_beside_default(np.array([False, False, False, True]), cands, p_not_worse).tolist() == \
        [False, False, False, True]
