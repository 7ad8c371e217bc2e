"""Picks on validation grids (issue 55, part 4): the smooth plateau-centre rule, its margin in
validation items, the fragile flag, and every committed grid's pick record."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from contrastlab.models.grid_picks import FRAGILE_SHARE, argmax_pick, pick_fusion_weight, pick_on_grid

ROOT = Path(__file__).resolve().parents[2]


def test_a_one_item_win_is_flagged_fragile():
    """The issue's case: Rank@10 671 vs 670 of 894 validation queries. As an argmax the
    margin is one item (fragile); the smooth rule's margin is in the same item units."""
    n = 894
    rec = argmax_pick([0.5, 0.7], [670 / n, 671 / n], n, ties=[0.60, 0.59])
    assert rec["choice"] == 0.7 and rec["runner_up"] == 0.5
    assert rec["margin_items"] == pytest.approx(1.0) and rec["fragile"]
    # a 20-item lead is not fragile (over 1 % of 894 = 8.94 items)
    rec = argmax_pick([0.5, 0.7], [650 / n, 670 / n], n)
    assert rec["margin_items"] == pytest.approx(20.0) and not rec["fragile"]
    # a tie on the primary criterion: margin 0, the tie-break's lead recorded
    rec = argmax_pick(["a", "b"], [0.5, 0.5], 100, ties=[0.3, 0.4])
    assert rec["choice"] == "b" and rec["margin_items"] == 0 and rec["fragile"]
    assert rec["tie_gap_items"] == pytest.approx(10.0)


def test_plateau_centre_and_its_margin():
    n = 1000  # tolerance 0.01 = 10 items
    w = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    mrr = [0.30, 0.50, 0.595, 0.600, 0.598, 0.597, 0.50]
    rec = pick_on_grid(w, mrr, n)
    # plateau 0.2..0.5 (within 0.01 of 0.600); centre between 0.3 and 0.4: the higher MRR
    assert rec["plateau"] == [0.2, 0.3, 0.4, 0.5] and rec["best"] == 0.3 and rec["choice"] == 0.3
    assert rec["rule"] == "plateau_centre" and rec["tolerance_items"] == pytest.approx(10.0)
    # the closest flip: 0.4 overtakes 0.3 in the centre tie (2 items), or 0.2 leaves the
    # plateau (0.595 - 0.590 = 5 items): 2 items
    assert rec["margin_items"] == pytest.approx(2.0, abs=1e-3) and rec["runner_up"] == 0.4
    assert rec["fragile"] == (rec["margin_items"] < FRAGILE_SHARE * n)
    # a symmetric plateau of 5: its middle point even when an edge is the best
    rec = pick_on_grid(w, [0.1, 0.595, 0.597, 0.598, 0.599, 0.600, 0.2], n)
    assert rec["plateau"] == [0.1, 0.2, 0.3, 0.4, 0.5] and rec["choice"] == 0.3
    # the pick moves only when an edge point crosses the tolerance (0.590): 0.1 lowered by
    # just over 5 items leaves the plateau
    moved = pick_on_grid(w, [0.1, 0.5899, 0.597, 0.598, 0.599, 0.600, 0.2], n)
    assert moved["choice"] == 0.4 and rec["margin_items"] == pytest.approx(5.0, abs=1e-3)
    assert rec["runner_up"] == 0.4


def test_plateau_is_connected_and_works_in_two_dimensions():
    # a second peak within tolerance but separated by a dip is not part of the plateau
    rec = pick_on_grid([1, 2, 3, 4, 5], [0.60, 0.599, 0.40, 0.598, 0.30], 500)
    assert rec["plateau"] == [1, 2]
    pts = [{"k1": k, "b": b} for k in (1, 2, 3) for b in (0, 1, 2)]
    coords = [(i, j) for i in range(3) for j in range(3)]
    vals = [0.1, 0.1, 0.1, 0.1, 0.595, 0.596, 0.1, 0.597, 0.600]
    rec = pick_on_grid(pts, vals, 1000, coords=coords)
    # plateau {(1,1), (1,2), (2,1), (2,2)}: centroid (1.5, 1.5), all four equidistant: best MRR
    assert len(rec["plateau"]) == 4 and rec["choice"] == {"k1": 3, "b": 2}
    with pytest.raises(ValueError):
        pick_on_grid([0.1, 0.2], [0.5], 10)
    with pytest.raises(ValueError):
        pick_on_grid([0.1], [float("nan")], 10)
    one = pick_on_grid([0.5], [0.4], 10)
    assert one["margin_items"] is None and one["runner_up"] is None and not one["fragile"]


def test_fusion_weight_pick_is_the_same_rule_for_any_ranker():
    """The control and a trained fusion go through one function: equal ranks, equal picks."""
    rng = np.random.default_rng(0)
    ranks = {w: [rng.integers(1, 30, 200)] for w in (0.0, 0.5, 1.0)}
    a = pick_fusion_weight(ranks)
    b = pick_fusion_weight({w: [r[0].copy()] for w, r in ranks.items()})
    assert a == b and a[2]["n_val"] == 200 and "margin_items" in a[2]


def _grid_records(obj, path=""):
    """Every dict of a metrics JSON that holds a validation grid (a ``*_grid`` list)."""
    if isinstance(obj, dict):
        if any(k.endswith("_grid") and isinstance(v, list) for k, v in obj.items()):
            yield path, obj
        for k, v in obj.items():
            yield from _grid_records(v, f"{path}/{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _grid_records(v, f"{path}[{i}]")


def _files():
    return sorted((ROOT / "reports" / "metrics").rglob("*.json"))


def test_every_committed_grid_pick_records_its_margin():
    """A committed choice made on a validation grid (fusion weight, BM25 k1/b, ridge lambda)
    without its pick record, margin in validation items and fragile flag fails here."""
    seen = 0
    for f in _files():
        for path, rec in _grid_records(json.loads(f.read_text())):
            where = f"{f.relative_to(ROOT)}{path}"
            pick = rec.get("pick")
            assert isinstance(pick, dict), f"{where}: a grid choice without a pick record"
            assert "margin_items" in pick and "n_val" in pick and "fragile" in pick, where
            grid = next(v for k, v in rec.items() if k.endswith("_grid"))
            if len(grid) > 1:
                m = pick["margin_items"]
                assert isinstance(m, (int, float)) and m >= 0, f"{where}: margin {m!r}"
                assert pick["fragile"] == (m < FRAGILE_SHARE * pick["n_val"]), where
            # the reported choice is the pick, or the rule was not rerun and says so
            chosen = rec.get("weight", rec.get("lambda"))
            if "k1" in rec:
                chosen = {"k1": rec["k1"], "b": rec["b"]}
            if chosen != pick["choice"]:
                assert rec.get("pick_rule_not_rerun"), (
                    f"{where}: reports {chosen} but its rule picks {pick['choice']}")
                assert rec.get("committed_pick", {}).get("choice") == chosen, where
            seen += 1
    assert seen >= 10  # the default table's fusions, BM25 and ridge at least


def test_the_control_has_test_ranks_at_every_weight_of_its_grid():
    """Each trained fusion is compared with the control at its own weight: the committed
    control carries its test metrics at every grid weight, ranks included."""
    import pandas as pd

    h = json.loads((ROOT / "reports/metrics/code/hybrids.json").read_text())["hybrids"]
    ctl = h["fusion_sentence"]
    by_w = {g["weight"]: g for g in ctl["test_by_weight"]}
    assert sorted(by_w) == [g["weight"] for g in ctl["weight_grid"]]
    assert by_w[ctl["weight"]]["rank_at_10"] == pytest.approx(ctl["rank_at_10"])
    ranks = pd.read_csv(ROOT / "reports/data/code/hybrids_ranks.csv")
    for w, g in by_w.items():
        r = ranks[ranks["hybrid"] == g["hybrid"]]["rank"]
        assert len(r) == json.loads((ROOT / "reports/metrics/code/hybrids.json").read_text())["n_queries"]
        assert (r <= 10).mean() == pytest.approx(g["rank_at_10"])
    for name, m in h.items():  # every trained fusion's weight has a control at that weight
        if name.startswith("fusion_"):
            assert m["weight"] in by_w, name


def test_report_shows_each_fusion_beside_the_control_at_the_same_weight(tmp_path):
    """The table has the 'vs control at the same w' column, the fusion's weight cell its margin
    and ‡ when fragile, † when the rule was not rerun; the headline's gain over the control
    is computed against the control at the fusion's weight, not at the control's own pick."""
    import pandas as pd

    from contrastlab.reporting.code import SAME_W_COLUMN, build_section

    n, rng = 80, np.random.default_rng(0)
    m, d = tmp_path / "reports/metrics/code", tmp_path / "reports/data/code"
    m.mkdir(parents=True)
    d.mkdir(parents=True)
    ids, repo = np.arange(n), [f"r{i % 8}" for i in range(n)]

    def ranks(share):
        return np.where(rng.random(n) < share, 1, rng.integers(20, 200, n))

    bl, rows = {}, []
    for k, share, val in (("bm25", 0.5, 0.6), ("sentence", 0.3, 0.4)):
        r = ranks(share)
        rows.append(pd.DataFrame({"id": ids, "repo": repo, "baseline": k, "rank": r}))
        bl[k] = {"rank_at_10": float((r <= 10).mean()), "val_rank_at_10": val, "median_rank": 1.0}
    bl["bm25"].update(k1=1.2, b=0.75)
    (m / "baselines.json").write_text(json.dumps({"baselines": bl, "corpus_size": 500}))
    pd.concat(rows).to_csv(d / "baselines_ranks.csv", index=False)
    grid = [{"weight": w, "val_mrr": 0.5, "val_rank_at_10": 0.6} for w in (0.3, 0.5, 0.7)]
    # the control: strong at its own pick (0.7), weak at 0.5, the trained fusion's weight
    ctl = {0.3: ranks(0.4), 0.5: ranks(0.2), 0.7: ranks(0.9)}
    hr = [pd.DataFrame({"id": ids, "repo": repo, "hybrid": f"fusion_sentence@w{w:g}", "seed": 0,
                        "rank": r}) for w, r in ctl.items()]
    hr.append(pd.DataFrame({"id": ids, "repo": repo, "hybrid": "fusion_sentence", "seed": 0,
                            "rank": ctl[0.7]}))
    hr += [pd.DataFrame({"id": ids, "repo": repo, "hybrid": "fusion_infonce", "seed": s,
                         "rank": ranks(0.8)}) for s in range(3)]
    pd.concat(hr).to_csv(d / "hybrids_ranks.csv", index=False)
    pick = {"margin_items": 0.4, "fragile": True, "n_val": 100, "choice": 0.7}
    h = {"fusion_sentence": {"variant": "sentence", "kind": "fusion", "n_seeds": 1, "weight": 0.7,
                             "weight_grid": grid, "pick": pick, "median_rank": 1,
                             "test_by_weight": [{"weight": w, "hybrid": f"fusion_sentence@w{w:g}"}
                                                for w in ctl]},
         "fusion_infonce": {"variant": "infonce", "kind": "fusion", "n_seeds": 3, "weight": 0.5,
                            "weight_grid": grid, "median_rank": 1, "pick_rule_not_rerun": True,
                            "pick": {**pick, "margin_items": 12.0, "fragile": False, "choice": 0.3}}}
    (m / "hybrids.json").write_text(json.dumps({"hybrids": h, "corpus_size": 500}))
    s = build_section(tmp_path, tmp_path / "fig")
    t = s.tables[0]
    assert t.columns[-1] == SAME_W_COLUMN
    row = {r[0]: r for r in t.rows}
    fused = next(k for k in row if "score fusion (w=0.5)" in k)
    control = next(k for k in row if "score fusion (w=0.7)" in k)
    assert row[fused][-1].startswith("▲ +") and "at w=0.5" in row[fused][-1]
    assert row[control][-1] == "(the control)"
    assert row[control][8] == "w=0.7 (val; margin 0.4 items‡)"
    assert row[fused][8] == "w=0.5 (val; margin 12.0 items) †"
    assert "Against the control at the same weight" in s.headline
    assert "margin 0.4 validation items, under 1 % of them" in s.headline
    assert "significantly above the control at their weight: 1 of 1" in s.headline


def test_default_table_picks_follow_the_smooth_rule_and_docs_state_the_report():
    """The default table's BM25 and ridge picks are the plateau-centre rule's (the former
    argmax kept as rank10_pick), no default-table fusion is flagged not rerun, and the "now"
    cells of docs/code.md's picks table are the report's generated numbers."""
    import re

    b = json.loads((ROOT / "reports/metrics/code/baselines.json").read_text())["baselines"]
    for row in ("bm25", "ridge"):
        assert b[row]["pick"]["rule"] == "plateau_centre" and "rank10_pick" in b[row], row
    for f in ("hybrids.json", "hybrids_biencoder.json"):
        h = json.loads((ROOT / "reports/metrics/code" / f).read_text())["hybrids"]
        assert not [k for k, v in h.items() if v.get("pick_rule_not_rerun")], f
    doc = (ROOT / "docs/code.md").read_text()
    report = (ROOT / "reports/comparison.md").read_text()
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| ([^|]+?) \| [^|]+ \| ([^|]+) \|$", doc, re.M)}
    ctl = rows["control's weight, test Rank@10"]
    gain = rows["best trained fusion vs the control"]
    ci = re.search(r"(\d+\.\d \[[\d.]+, [\d.]+\] %)", ctl).group(1)
    assert f"reaches {ci} at its validation pick" in report
    d = re.search(r"([+-]\d+\.\d \[[+-][\d.]+, [+-][\d.]+\]) points, Holm (p = [\d.]+)", gain)
    assert f"'s {d.group(1)} points" in report and d.group(2) in report
    n = re.search(r"(\d+) / (\d+) of 9", rows["trained fusions significantly above / below the control"])
    assert f"above the control at their weight: {n.group(1)} of 9, below: {n.group(2)}" in report


def test_early_stopping_pick_by_hand():
    """Rank@10 rule: the first epoch with the highest validation Rank@10, margin = its gap to
    the runner-up epoch in queries (0 on a tie). MRR rule: the centre of the plateau within 1 %
    of the queries of the best MRR, margin = the smallest MRR change (in queries) that moves
    it. Each records the other rule's epochs beside."""
    import pandas as pd

    from contrastlab.training.code_final import early_stopping_pick

    n = 200
    h = pd.DataFrame({"seed": [0, 0, 0, 0, 1, 1, 1],
                      "epoch": [0, 1, 2, 3, 1, 2, 3],
                      "val_rank_at_10": [c / n for c in (100, 130, 127, 120, 90, 90, 80)],
                      "val_mrr": [0.30, 0.40, 0.45, 0.30, 0.2, 0.3, 0.2]})
    shuffled = h.sample(frac=1.0, random_state=0)  # row order does not matter
    rec = early_stopping_pick(shuffled, n, "rank_at_10")
    assert rec["chosen_seed"] == [1, 1] and rec["runner_up_seed"] == [2, 2]
    assert rec["margin_seed"] == pytest.approx([3.0, 0.0])
    assert rec["n_val"] == n and rec["fragile_seeds"] == 1   # 3 >= 1 % of 200; a tie is fragile
    assert rec["other_rule"] == "mrr_plateau" and rec["other_rule_seed"] == [2, 2]
    # MRR: epoch 2 alone is within 0.01 of the best in both seeds (plateau of one). In seed 0
    # epoch 1 (0.40) joining the plateau is not enough (a plateau {1, 2} has two centres, the
    # higher MRR wins: still 2); it must pass 0.45: a change of 0.05, 10 queries of 200
    mrr = early_stopping_pick(shuffled, n)
    assert mrr["rule"] == "mrr_plateau" and mrr["chosen_seed"] == [2, 2]
    assert mrr["other_rule_seed"] == [1, 1] and mrr["margin_seed"][0] == pytest.approx(10.0, abs=0.01)
    h2 = h.assign(val_mrr=[0.30, 0.445, 0.45, 0.446, 0.2, 0.3, 0.2])  # plateau 1-3 in seed 0
    assert early_stopping_pick(h2, n)["chosen_seed"] == [2, 2]
    h3 = h.assign(val_mrr=[0.445, 0.446, 0.45, 0.30, 0.2, 0.3, 0.2])  # plateau 0-2: centre 1
    assert early_stopping_pick(h3, n)["chosen_seed"] == [1, 2]
    with pytest.raises(ValueError, match="empty"):
        early_stopping_pick(h.iloc[:0], n)
    with pytest.raises(ValueError, match="unknown rule"):
        early_stopping_pick(h, n, "val_loss")


def test_every_committed_early_stopping_pick_records_its_margin():
    """A committed code-track run (predictors: final and declared configuration, default and
    seed corpus) or fine-tuned encoder whose early-stopping choice has no margin per seed
    fails here. (The GPU fine-tuning preset's runs predate the record: docs/statistics.md.)"""
    seen = 0
    tracks = ("code", "code_seed_corpus", "finetune")
    for f in (f for t in tracks for f in sorted((ROOT / "reports" / "metrics" / t).rglob("*.json"))):
        m = json.loads(f.read_text())
        if not isinstance(m, dict):
            continue
        where = f.relative_to(ROOT)
        steps = m.get("best_step") if "finetune" in f.parts else (
            [s["best_epoch"] for s in m["per_seed"]] if "best_epoch" in m and "per_seed" in m else None)
        if not steps:  # not trained with early stopping (baselines, a TF-IDF row)
            continue
        es = (m.get("picks") or {}).get("early_stopping")
        assert es is not None, f"{where}: early stopping without its margin"
        assert es["chosen_seed"] == steps, f"{where}: recorded picks {es['chosen_seed']} vs {steps}"
        assert len(es["margin_seed"]) == len(steps) and min(es["margin_seed"]) >= 0, where
        assert es["fragile_seeds"] == sum(x < FRAGILE_SHARE * es["n_val"] for x in es["margin_seed"]), where
        seen += 1
    assert seen >= 6 + 5  # six code predictors, five fine-tuned rows


def _study_span_s(journal: Path, study: str | None = None) -> float:
    """Seconds from the first trial's start to the last trial's end of ``study`` (None: the
    journal's only study) in an Optuna journal."""
    import optuna
    from optuna.storages.journal import JournalFileBackend

    storage = optuna.storages.JournalStorage(JournalFileBackend(str(journal)))
    trials = optuna.load_study(study_name=study, storage=storage).get_trials(deepcopy=False)
    stamps = sorted(d for t in trials for d in (t.datetime_start, t.datetime_complete) if d)
    return (stamps[-1] - stamps[0]).total_seconds()


def test_docs_state_the_studies_durations_the_journals_record():
    """docs/statistics.md gives the searched code losses' study times under the MRR rule, and
    docs/graph.md the self-supervised graph studies' under the log-loss trial probe (the
    studies the committed choices name); both come from the committed journals."""
    import re

    code = [_study_span_s(f) / 60 for f in sorted((ROOT / "reports/tune/code").glob("*/journal.log"))
            if not f.parent.name.startswith("biencoder")]
    lo, hi = map(int, re.search(r"studies took (\d+)-(\d+) minutes each",
                                (ROOT / "docs/statistics.md").read_text()).groups())
    assert len(code) == 4 and (round(min(code)), round(max(code))) == (lo, hi)
    from contrastlab.params import load_params
    from contrastlab.training.graph_tune import study_fixed
    from contrastlab.tuning.space import study_name

    g = load_params(ROOT / "params.yaml").graph
    g_acc = g.model_copy(update={"tune": g.tune.model_copy(update={"probe_criterion": "accuracy"})})
    doc = (ROOT / "docs/graph.md").read_text()
    for rule, unit, pattern in (("log_loss", 60, r"log-loss studies took (\d+)-(\d+) minutes each"),
                                ("accuracy", 3600, r"accuracy studies of \S+ record ([\d.]+)-([\d.]+) hours")):
        gr = g if rule == "log_loss" else g_acc
        spans = [_study_span_s(ROOT / f"reports/tune/graph/{v}/journal.log",
                               study_name("graph", v, gr.variants[v].search, study_fixed(gr, v))) / unit
                 for v in ("ntxent", "mixco", "mochi")]
        said = re.search(pattern, doc.replace("\n", " ")).groups()
        shown = ((str(round(min(spans))), str(round(max(spans)))) if unit == 60
                 else (f"{min(spans):.1f}", f"{max(spans):.1f}"))
        assert shown == said, (rule, spans, said)


def test_the_tuning_rule_is_part_of_a_studys_identity():
    """code.tune.early_stopping: mrr_plateau enters a study's identity, so the MRR studies
    never resume the earlier Rank@10 studies; rank_at_10 leaves the identity as it was before
    the rule existed. The final runs' rule (code.train.early_stopping) never enters it. The
    committed choices name the studies the current params identify."""
    from contrastlab.params import load_params
    from contrastlab.training.code_tune import study_fixed
    from contrastlab.tuning.space import study_name

    code = load_params(ROOT / "params.yaml").code
    assert code.tune.early_stopping == "mrr_plateau" == code.train.early_stopping
    mrr = study_fixed(code, "infonce")
    assert mrr["early_stopping"] == "mrr_plateau" and "early_stopping" not in mrr["train"]
    other_train = code.model_copy(update={"train": code.train.model_copy(update={"early_stopping": "rank_at_10"})})
    assert study_fixed(other_train, "infonce") == mrr
    r10 = code.model_copy(update={"tune": code.tune.model_copy(update={"early_stopping": "rank_at_10"})})
    assert {**study_fixed(r10, "infonce"), "early_stopping": "mrr_plateau"} == mrr
    assert "early_stopping" not in study_fixed(r10, "infonce")
    for v, var in code.variants.items():
        tuned = json.loads((ROOT / "reports/tuned/code" / f"{v}.json").read_text())
        if var.search:
            assert tuned["study"] == study_name("code", v, var.search, study_fixed(code, v)), v
            assert tuned["objective"] == "val_mrr", v


@pytest.mark.parametrize("rule, score", [("mrr_plateau", "val_mrr"), ("rank_at_10", "val_rank_at_10")])
def test_a_trial_scores_the_kept_epochs_validation_score_of_its_rule(tmp_path, monkeypatch, rule, score):
    """A tuning trial's value is the mean over the tuning seeds of the rule's own score
    (code.tune.early_stopping: MRR for mrr_plateau, Rank@10 for rank_at_10) at each run's
    kept epoch, not at its best epoch, and the tuned file names that objective."""
    import contrastlab.training.code_tune as ct
    from contrastlab.params import load_params

    code = load_params(ROOT / "params.yaml").code
    code = code.model_copy(update={"tune": code.tune.model_copy(update={"early_stopping": rule})})
    seen = []

    def fake_train(*a, seed, early_stopping, **k):
        seen.append(early_stopping)
        hist = [{"epoch": e, "val_mrr": 0.1 * e + seed / 1000, "val_rank_at_10": 0.5 - 0.01 * e}
                for e in range(4)]
        return {"history": hist, "best_epoch": 2, "best_val_rank_at_10": -1.0}

    monkeypatch.setenv("CONTRASTLAB_MLFLOW", "0")
    monkeypatch.setattr(ct, "load_code_data", lambda *a: (None, 8))
    monkeypatch.setattr(ct, "prepare_targets", lambda *a: None)
    monkeypatch.setattr(ct, "train_code", fake_train)
    res = ct.run_tuning(code, "infonce_scratch", "s", "t", tmp_path / "tuned", tmp_path / "h",
                        tmp_path / "j")
    want = np.mean([{"val_mrr": 0.2 + s / 1000, "val_rank_at_10": 0.48}[score] for s in code.tune.seeds])
    assert res.best_value == pytest.approx(want) and set(seen) == {rule}
    assert json.loads((tmp_path / "tuned" / "infonce_scratch.json").read_text())["objective"] == score
