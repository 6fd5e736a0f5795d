"""The tables of notebook 05 (controls): its checks of the comparison of a discovered set S with random sets.

Each function takes the notebook's Experiment (its model, head-sets and cached runs: the layer-matched runs of
notebooks 03 and 04 are read back) and the R of its table, and returns the table as notebook 05 writes it
(Table 10 and Table 14 merged with the paper's values). Every random draw comes from its named stream
(helpers/measures/streams.STREAMS) under the run's seed. Head-sets are bool [L, H]; attention masses [L, H].
"""

import numpy as np
import pandas as pd

from helpers import sizes
from helpers.engine.row_groups import ROW_GROUPS
from helpers.measures import streams
from helpers.measures.controls import (
    against_controls,
    attention_matched_sets,
    layer_matched_sets,
    per_layer_controls,
    spill_note,
    with_controls,
)
from helpers.measures.head_mass import set_mass_statistics
from helpers.measures.necessity import ncs
from helpers.measures.overlap import top_k
from helpers.measures.stats import excess_over_random, holm, rank_p, spearman
from helpers.measures.steering import cers
from helpers.stimuli.design import k_for
from helpers.studies.experiment import Experiment

ROW_COLUMNS = ("R", "interval", "S", "S low", "S high", "random mean")  # S against its random sets, as in Table 3
# Table 15: pairs of settings that differ in one factor, and the factor
SHARED_HEAD_PAIRS = (
    ("cm-ord-qsp", "co-ord-qsp", "corpus (cm vs co), ordinal"),
    ("cm-ord-last", "co-ord-last", "corpus (cm vs co), ordinal"),
    ("cm-ord-qsp", "cm-ref-qsp", "query type (ord vs ref), comics"),
    ("cm-ord-last", "cm-ref-last", "query type (ord vs ref), comics"),
    ("co-ord-qsp", "co-ord-out", "source (X vs out), COCO ordinal"),
    ("co-ord-last", "co-ord-out", "source (X vs out), COCO ordinal"),
)


def rank_p_table(exp: Experiment, grid_mass: np.ndarray, single_mass: np.ndarray, n_random: int) -> pd.DataFrame:
    """Table 9: per setting, CERS and NCS of S against R layer-matched sets (A) and R sets that also match S's
    image-attention mass (B; `grid_mass` on the grids CERS is measured on, `single_mass` on the single-image MCQs
    of NCS), and the mean image mass of S, A and B on the grids."""
    rows = []
    for s, head_set in exp.discovered.items():
        layer_matched = exp.controls(s, n_random)
        cers_stream = streams.stream(exp.seed, "table09/attention-matched-cers/{setting}", setting=s)
        ncs_stream = streams.stream(exp.seed, "table09/attention-matched-ncs/{setting}", setting=s)
        matched_cers = attention_matched_sets(head_set, grid_mass, n_random, cers_stream)
        matched_ncs = attention_matched_sets(head_set, single_mass, n_random, ncs_stream)
        cers_a, cers_b = (cers(exp.steer(with_controls(head_set, c))).mean(0) for c in (layer_matched, matched_cers))
        ncs_a, ncs_b = (ncs(exp.mask(with_controls(head_set, c))).mean(0) for c in (layer_matched, matched_ncs))
        rows.append(
            {
                "setting": s,
                "R": n_random,
                "CERS S": cers_a[0],
                "CERS random A": cers_a[1:].mean(),
                "CERS p A": rank_p(cers_a[0], cers_a[1:]),
                "CERS random B": cers_b[1:].mean(),
                "CERS p B": rank_p(cers_b[0], cers_b[1:]),
                "NCS S": ncs_a[0],
                "NCS random A": ncs_a[1:].mean(),
                "NCS p A": rank_p(ncs_a[0], ncs_a[1:]),
                "NCS random B": ncs_b[1:].mean(),
                "NCS p B": rank_p(ncs_b[0], ncs_b[1:]),
                "image mass S": grid_mass[head_set].mean(),
                "image mass A": np.mean([grid_mass[c].mean() for c in layer_matched]),
                "image mass B": np.mean([grid_mass[c].mean() for c in matched_cers]),
            }
        )
    return pd.DataFrame(rows)


def large_r_table(exp: Experiment, n_random: int, table3: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """Table 10: NCS of the referring + query-span sets against R layer-matched sets (the first R of Table 3's
    stream), their rank p Holm-adjusted together with `table3`'s (notebook 04's table03_ncs, indexed by setting)
    other settings, and the paper's values (`paper`) with the z they give."""
    rows = []
    for s in sizes.REF_QSP:
        row = against_controls(ncs(exp.mask_controls(s, n_random)))
        rows.append(
            {"setting": s}
            | {k: row[k] for k in (*ROW_COLUMNS, "random sd", "random max", "p", "z", "z capped")}
            | {"p floor": 1 / (n_random + 1)}
        )
    table = pd.DataFrame(rows)
    holm_p, holm_r = table3["p"].copy(), table3["R"].copy()
    holm_p[table.setting], holm_r[table.setting] = table.p.values, n_random
    table["p Holm (12 settings)"] = holm(holm_p.values)[[holm_p.index.get_loc(s) for s in table.setting]]
    table["Holm R's"] = ", ".join(f"{r} ({n} settings)" for r, n in holm_r.value_counts().sort_index().items())
    table = table.merge(paper, on="setting", how="left")
    table["paper z"] = (table.paper_NCS - table.paper_random_mean) / table.paper_random_sd
    return table


def row_groups_table(
    exp: Experiment,
    n_random: int,
    settings: tuple[str, ...] = ("co-ref-qsp", "co-ord-qsp"),
    row_groups: tuple[str, ...] = ROW_GROUPS,
    selections: tuple[str, ...] = ("flat", "per layer"),
) -> pd.DataFrame:
    """NCS of each of `settings`' sets, flat top-k and top-k per layer (`selections`), with the image hidden at each
    of `row_groups`, against its first `n_random` layer-matched sets: one row per setting, selection and row group
    (the defaults: Table 13; 04's Table 5 lays out its flat rows by row_group_columns). The flat sets run through
    Experiment.mask_controls (a larger R reads Table 3's run back)."""
    per_layer = exp.head_sets("_per_layer")
    rows = []
    for s in settings:
        for selection in selections:
            head_set = exp.discovered[s] if selection == "flat" else per_layer[s]
            controls = None if selection == "flat" else per_layer_controls(head_set, s, n_random, exp.seed)
            for row_group in row_groups:
                run = (
                    exp.mask_controls(s, n_random, row_group)
                    if selection == "flat"
                    else exp.mask(with_controls(head_set, controls), row_group)
                )
                row = against_controls(ncs(run))
                rows.append(
                    {"setting": s, "selection": selection, "heads": int(head_set.sum()), "row group": row_group}
                    | {k: row[k] for k in (*ROW_COLUMNS, "p")}
                )
    return pd.DataFrame(rows)


def row_group_columns(table: pd.DataFrame) -> dict[str, dict]:
    """Setting -> its rows of `table` (row_groups_table, one selection) in one row, as Table 5 lays them out: the
    setting, R and interval, then for each row group g: g (S), "g low", "g high", "g random mean" and "g p"."""
    columns = {}
    for row in table.to_dict("records"):
        g = row["row group"]
        columns.setdefault(row["setting"], {"setting": row["setting"], "R": row["R"], "interval": row["interval"]})
        columns[row["setting"]] |= {g: row["S"], f"{g} low": row["S low"], f"{g} high": row["S high"]}
        columns[row["setting"]] |= {f"{g} random mean": row["random mean"], f"{g} p": row["p"]}
    return columns


def ncs_vs_k_table(
    exp: Experiment, score_maps: dict, shares: list, n_random: int, n_random_paper_k: int, paper: pd.DataFrame
) -> pd.DataFrame:
    """Table 14: NCS of the top-k of each score map ({setting: [L, H]}) for k at each of `shares` of the heads,
    each against its own layer-matched sets (R = `n_random_paper_k` at the paper's k, `n_random` elsewhere), with
    the layers their controls borrow from and the paper's values (`paper`)."""
    n_heads = exp.n_layers * exp.n_heads
    rows = []
    for s, scores in score_maps.items():
        for share in shares:
            k = k_for(n_heads, share)
            head_set = top_k(scores, k)
            r = n_random_paper_k if k == k_for(n_heads) else n_random
            stream = streams.stream(exp.seed, "table14/{setting}/k{k}", setting=s, k=k)
            controls = layer_matched_sets(head_set, r, stream, spill=True)
            row = against_controls(ncs(exp.mask(with_controls(head_set, controls))))
            rows.append(
                {"setting": s, "k share": share, "k": k}
                | {c: row[c] for c in (*ROW_COLUMNS, "random sd", "p")}
                | {"controls spill": spill_note(head_set)}
            )
    return pd.DataFrame(rows).merge(paper, on=["setting", "k share"], how="left")


def shared_heads_table(exp: Experiment, n_random: int) -> pd.DataFrame:
    """Table 15: for each pair of SHARED_HEAD_PAIRS, the heads both sets hold and the heads only one holds, each
    against R layer-matched sets drawn outside both sets: its NCS excess over their mean, the paper's p (its
    caption: a paired one-sided test over items of the part's NCS against the random sets' mean NCS,
    helpers.measures.stats.excess_over_random) and, labelled `rank p`, its rank p among the R sets."""
    rows = []
    for a, b, factor in SHARED_HEAD_PAIRS:
        A, B = exp.discovered[a], exp.discovered[b]
        row = {"comparison": factor, "a": a, "b": b, "shared": int((A & B).sum()), "a only": int((A & ~B).sum())}
        row.update({"R": n_random, "controls from": "heads in neither a nor b"})
        spills = []
        for part, head_set in {"shared": A & B, "a-only": A & ~B, "b-only": B & ~A}.items():
            if not head_set.any():
                row[f"{part} excess"], row[f"{part} p"], row[f"{part} rank p"] = np.nan, np.nan, np.nan
                continue
            stream = streams.stream(exp.seed, "table15/{a}+{b}/{part}", a=a, b=b, part=part)
            controls = layer_matched_sets(head_set, n_random, stream, A | B, spill=True)
            note = spill_note(head_set, A | B)
            if note:
                spills.append(f"{part}: {note}")
            values = ncs(exp.mask(with_controls(head_set, controls)))  # [N, 1 + R]
            row[f"{part} excess"], row[f"{part} p"] = excess_over_random(values[:, 0], values[:, 1:])
            row[f"{part} rank p"] = against_controls(values)["p"]
        rows.append(row | {"controls spill": "; ".join(spills)})
    return pd.DataFrame(rows)


def mass_cers_table(exp: Experiment, grid_mass: np.ndarray, n_random: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Table 17: per setting, the image-attention mass (`grid_mass`) of S and of its R layer-matched sets, and the
    Spearman correlation across those sets between each mass statistic and the set's CERS; and the points of
    its figure (every set's mean mass and CERS)."""
    rows, points = [], []
    for s in exp.discovered:
        sets = exp.with_controls(s, n_random)  # [1 + R, L, H]
        statistics = set_mass_statistics(grid_mass, sets)  # [1 + R] rows
        scores = cers(exp.steer(sets)).mean(0)  # [1 + R]
        random_means = statistics["mean"].iloc[1:]
        row = {
            "setting": s,
            "R": n_random,
            "mass S": statistics["mean"].iloc[0],
            "mass random": random_means.mean(),
            "mass random min": random_means.min(),
            "mass random max": random_means.max(),
        }
        row.update({f"rho {stat}": spearman(statistics[stat].iloc[1:], scores[1:]) for stat in statistics.columns})
        rows.append(row)
        points += [
            {"setting": s, "kind": "S" if i == 0 else "random", "mass": m, "CERS": c}
            for i, (m, c) in enumerate(zip(statistics["mean"], scores))
        ]
    return pd.DataFrame(rows), pd.DataFrame(points)
