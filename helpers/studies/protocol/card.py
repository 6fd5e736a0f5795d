"""The report card's checks on one model (`Protocol`) and every table of the card (`build_card`)."""

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from helpers.engine import HIDE, load_model
from helpers.engine.model_files import model_fingerprint
from helpers.measures import streams, verdicts
from helpers.measures.baselines import audit
from helpers.measures.controls import (
    any_layer_sets,
    layer_matched_controls,
    spill_note,
    with_controls,
    with_effect,
)
from helpers.measures.discovery import discover, setting_scores
from helpers.measures.methods import METHODS, PER_ITEM
from helpers.measures.methods.cached import method_run
from helpers.measures.methods.ceiling import half_split_ceiling
from helpers.measures.necessity import ncs
from helpers.measures.overlap import half_split_overlaps, split_halves
from helpers.measures.stats import holm, t_interval
from helpers.measures.steering import cers, ncs_grid
from helpers.sizes import card_forward_copies, card_sizes
from helpers.stimuli.design import parse_setting
from helpers.storage import headsets, paths
from helpers.storage.cache import ResultCache
from helpers.studies.controls.schemes import scheme_run
from helpers.studies.evaluation import Evaluation
from helpers.studies.protocol.conclusions import conclusion, verdict_table
from helpers.studies.protocol.head_sets import HeadSet, resolve_head_sets


class Protocol(Evaluation):
    """The model, the cache and the sizes of one report card; the cached runs (`Evaluation`: steer, mask)
    are notebooks 03-05's calls at this card's item count, so a card on a discovery setting reads them back.

    What the card takes of other notebooks comes from the runner (helpers.runner.card_inputs.NotebookProtocol):
    `strips_per_forward`, notebook 01's strips per discovery forward (the cache is chunked by it, so 01's scores are
    read back), and `method_head_set(lm, method, params, folder, k) -> Path`, which saves the head-set a published
    method discovers on the loaded model (helpers.runner.card_inputs.method_head_set)."""

    def __init__(self, params, strips_per_forward: int, method_head_set: Callable):
        self.params = params
        self.strips_per_forward = strips_per_forward
        self.sizes = card_sizes(params.profile, params.sizes, params.smoke)
        lm = load_model(params.model, device=params.device, dtype=params.dtype)
        cache = ResultCache(params.cache_dir)
        super().__init__(lm, params.eval_corpus, self.sizes["n_items"], params.seed, cache, params.sets_per_forward)
        self.n_layers, self.n_heads = len(self.lm.adapter.candidate_layers), self.lm.adapter.n_heads
        # the checks keyed on pixel regions (CERS, its sweep, NCS_grid, the discovery ceiling) run where the
        # family maps regions to tokens; elsewhere they are "not run", with this reason
        self.no_regions = "" if self.lm.adapter.maps_regions else self.lm.adapter.no_region_mapping
        self.fingerprint = model_fingerprint(self.lm)
        entries = list(params.heads)
        if params.method is not None:  # discovered on the card's model, loaded once
            folder = Path(params.out_dir) / "headsets"
            entries.append(str(method_head_set(self.lm, params.method, params, folder, params.import_k)))
            print(f"{params.method} head-set: {paths.shown(entries[-1])}", flush=True)
        self.head_sets = resolve_head_sets(
            entries, params.data_dir, params.model, self.n_layers, self.n_heads, params.import_k
        )
        self.controls = getattr(params, "controls", None)  # a control scheme for the card's extra line, or None

    def layer_matched(self, head_set: HeadSet) -> np.ndarray:
        """[1 + R, L, H]: S, then R layer-matched random sets from the stream "layer-matched/<name>" (a
        discovery setting's: the draws of notebooks 03-05; a layer without room spills, named in provenance)."""
        controls = layer_matched_controls(head_set.mask, head_set.name, self.sizes["n_random"], self.params.seed)
        return with_controls(head_set.mask, controls)

    def any_layer(self, head_set: HeadSet) -> np.ndarray:
        """[R_any, L, H]: random sets of k heads from any layer, from notebook 03's stream for the set."""
        stream = streams.stream(self.params.seed, "table03/any-layer/{setting}", setting=head_set.name)
        return any_layer_sets((self.n_layers, self.n_heads), head_set.k, self.sizes["n_random_any"], stream)

    # ---- the card's parts

    def provenance(self, head_set: HeadSet) -> dict:
        record = head_set.record
        parts = parse_setting(head_set.setting) if head_set.setting else None
        return {
            "head-set": head_set.name,
            "file": paths.shown(head_set.path),
            "model": self.params.model,
            "weights fingerprint": self.fingerprint,
            "file's model": record["model"],
            "setting": record.get("setting", "--"),
            "corpus": parts.corpus if parts else record.get("corpus", "--"),
            "query": parts.query if parts else record.get("query", "--"),
            "source": parts.source if parts else record.get("source", "--"),
            "selection": record.get("selection", "--"),
            "method": record.get("method", "--"),
            "citation": record.get("citation", "--"),
            "k": head_set.k,
            "layers x heads": f"{self.n_layers} x {self.n_heads}",
            "layers used": " ".join(str(l) for l in np.nonzero(head_set.mask.any(1))[0]),
            "heads (layer.head)": " ".join(f"{layer}.{head}" for layer, head in np.argwhere(head_set.mask)),
            "layer-matched spill": spill_note(head_set.mask) or "none: every layer has room",
        }

    def ceiling(self, head_set: HeadSet) -> dict | None:
        """The half-split noise ceiling of the set's discovery setting or published method (None when it has
        neither): the mean over random half-splits of the strips of the top-k overlap between the two halves'
        scores."""
        if self.no_regions:
            return None
        if head_set.record.get("method") in METHODS:
            return self.method_ceiling(head_set)
        if head_set.setting is None:
            return None
        s, p = parse_setting(head_set.setting), self.params
        n_strips = self.sizes["n_strips"]
        per_item = discover(self.lm, s.corpus, s.query, n_strips, p.seed, self.cache, self.strips_per_forward)
        record = head_set.record
        scores = setting_scores(
            per_item, head_set.setting, record.get("key_agg", "raw"), record.get("row_agg", "mean")
        )
        splits = split_halves(n_strips, self.sizes["n_splits"], p.seed)
        shared = half_split_overlaps(scores, scores, head_set.k, splits)  # [n_splits]
        return {"ceiling": float(shared.mean()), "k": head_set.k, "n_strips": n_strips, "n_splits": len(splits)}

    def method_ceiling(self, head_set: HeadSet) -> dict | None:
        """The ceiling of a published method's set, on the card's model: the method's top-k on one half of the
        strips it was discovered on against its top-k on the other half (helpers.measures.methods.ceiling, 08's
        ceiling; a split where a half gives no score is left out)."""
        record, p = head_set.record, self.params
        method, n_items = record["method"], record["parameters"]["n_items"]
        run = method_run(self.lm, method, n_items, record["parameters"]["seed"], self.cache)
        splits = split_halves(n_items, self.sizes["n_splits"], p.seed)
        shared = half_split_ceiling(run, PER_ITEM[method][1], head_set.k, splits)  # [n_splits], NaN: no score
        kept = shared[~np.isnan(shared)]
        if not len(kept):
            return None
        return {"ceiling": float(kept.mean()), "k": head_set.k, "n_strips": n_items, "n_splits": len(kept)}

    def audit_table(self) -> pd.DataFrame:
        p = self.params
        values = audit(self.lm, p.eval_corpus, self.sizes["n_items"], p.seed, self.cache)  # name -> [N]
        rows = []
        for name, v in values.items():
            mean, low, high = t_interval(v)
            rows.append(
                {
                    "audit": name,
                    "P(correct)": mean,
                    "low": low,
                    "high": high,
                    "expected": verdicts.AUDIT_EXPECTED[name],
                }
            )
        return pd.DataFrame(rows)

    def against(self, values: np.ndarray, distinct: np.ndarray | None = None) -> dict:
        """S against its random sets from per-item values [N, 1 + R]: with_effect (over the `distinct` random columns
        where the draw repeats sets) and the rank p's floor."""
        row = with_effect(values, distinct)
        return {**row, "p floor": 1 / (row.get("distinct", row["R"]) + 1)}

    def necessity(self, head_set: HeadSet) -> tuple[list[dict], dict]:
        """NCS (as 04's Table 3) and NCS_grid (as 04's Table 6) rows with t-intervals over items,
        and the random sets' means [R] for the histograms."""
        stack = self.layer_matched(head_set)
        measures = {"NCS": ncs(self.mask(stack))}
        if not self.no_regions:
            measures["NCS_grid"] = ncs_grid(self.steer(stack, HIDE))
        rows, random_means = [], {}
        for measure, values in measures.items():  # values [N, 1 + R]
            rows.append(
                {
                    "head-set": head_set.name,
                    "measure": measure,
                    "control": "layer-matched",
                    **self.against(values),
                }
            )
            random_means[measure] = values[:, 1:].mean(0)
        return rows, random_means

    def steerability(self, head_set: HeadSet) -> tuple[list[dict], dict]:
        """CERS against layer-matched (as 03's Table 3) and any-layer random sets at the chosen beta."""
        beta = self.params.beta
        values = cers(self.steer(self.layer_matched(head_set), beta))  # [N, 1 + R]
        rows = [{"head-set": head_set.name, "measure": "CERS", "control": "layer-matched", **self.against(values)}]
        any_layer = cers(self.steer(self.any_layer(head_set), beta))  # [N, R_any]
        any_values = np.concatenate([values[:, :1], any_layer], axis=1)  # [N, 1 + R_any]
        rows.append({"head-set": head_set.name, "measure": "CERS", "control": "any-layer", **self.against(any_values)})
        return rows, {"CERS": values[:, 1:].mean(0), "CERS any-layer": any_layer.mean(0)}

    def beta_sweep(self, head_set: HeadSet) -> list[dict]:
        """CERS of S and its first n_sweep layer-matched sets at every beta (03's Table 18)."""
        n_sweep = min(self.sizes["n_sweep"], self.sizes["n_random"])
        sets = self.layer_matched(head_set)[: 1 + n_sweep]
        rows = []
        for beta in self.sizes["betas"]:
            means = cers(self.steer(sets, float(beta))).mean(0)  # [1 + n_sweep]
            rows.append(
                {
                    "head-set": head_set.name,
                    "beta": float(beta),
                    "S": means[0],
                    "random mean": means[1:].mean(),
                    "random min": means[1:].min(),
                    "random max": means[1:].max(),
                    "random sets": n_sweep,
                }
            )
        return rows

    def damage(self, head_set: HeadSet) -> pd.DataFrame:
        """05's Table 12 for the set (Evaluation.generic_damage: masses read at the question and option rows of
        the matched single-image items), named by the set."""
        table = self.generic_damage(head_set.mask)
        table.insert(0, "head-set", head_set.name)
        return table

    def score_map(self, head_set: HeadSet) -> np.ndarray | None:
        """[L, H] the discovery score of every head, for the bottom5 scheme: a setting's from 01's score table
        in the data folder (the scores notebook 05 draws from), an imported score matrix's own; else None."""
        table = Path(self.params.data_dir) / "discovery_scores.csv"
        if head_set.setting is not None and table.exists():
            return headsets.load_score_maps(table, [head_set.setting], self.n_layers, self.n_heads)[head_set.setting]
        if head_set.path.suffix in (".npy", ".csv"):
            matrix = (
                np.load(head_set.path)
                if head_set.path.suffix == ".npy"
                else np.loadtxt(head_set.path, delimiter=",", ndmin=2)
            )
            return matrix.astype(float) if matrix.shape == (self.n_layers, self.n_heads) else None
        return None

    def control_scheme(self, head_set: HeadSet) -> dict | None:
        """NCS of S against the random sets of the card's control scheme (`controls`) from the scheme's stream
        keyed by the set's name (a setting's: notebook 05's draws), by notebook 05's computation (scheme_run): a
        row as `necessity`'s, with the draws' mean size; the unseeded scheme pools one set per seed and adds the
        per-seed spread. None when bottom5 has no score map for the set."""
        scheme = self.controls
        scores = self.score_map(head_set) if scheme == "bottom5" else None
        if scheme == "bottom5" and scores is None:
            return None
        run = scheme_run(self, scheme, head_set.mask, head_set.name, self.sizes["n_random"], self.params.seed, scores)
        return {
            "head-set": head_set.name,
            "measure": "NCS",
            "control": scheme,
            "heads": run.heads,
            **self.against(run.values, run.distinct),
            **run.seeds,
        }

    def row_groups(self, head_set: HeadSet) -> list[dict]:
        """NCS with the image hidden from S at every row, the question + option rows, the last row (04's Table 5)."""
        stack = self.layer_matched(head_set)
        return [
            {"head-set": head_set.name, "row group": row_group, **self.against(ncs(self.mask(stack, row_group)))}
            for row_group in ("all", "prompt", "last")
        ]


def _holm_by(table: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Add 'p Holm': the rank p's Holm-adjusted across the head-sets, within each group of `by`."""
    table = table.copy()
    if table.empty:  # a check not run on this family
        return table
    table["p Holm"] = table.groupby(by)["p"].transform(lambda p: holm(p.to_numpy()))
    return table


def build_card(protocol: Protocol) -> dict:
    """Every table of the report card, its verdicts and its conclusion (a dict of DataFrames and lists)."""
    start = time.time()
    sets, sizes = protocol.head_sets, protocol.sizes
    audit_table = protocol.audit_table()
    audits = verdicts.audit_verdicts(dict(zip(audit_table["audit"], audit_table["P(correct)"])))
    provenance, ceilings, necessity, steer, sweep, damage, row_groups, random_means = [], {}, [], [], [], [], [], {}
    schemes, no_scheme = [], []
    for head_set in sets:
        ceilings[head_set.name] = protocol.ceiling(head_set)
        ceiling = ceilings[head_set.name]
        provenance.append(
            {
                **protocol.provenance(head_set),
                "noise ceiling": ceiling["ceiling"] if ceiling else np.nan,
                "ceiling / k": ceiling["ceiling"] / ceiling["k"] if ceiling else np.nan,
            }
        )
        nec_rows, nec_means = protocol.necessity(head_set)
        steer_rows, steer_means = protocol.steerability(head_set) if not protocol.no_regions else ([], {})
        necessity += nec_rows
        steer += steer_rows
        random_means[head_set.name] = {
            "S": {
                r["measure"] + ("" if r["control"] == "layer-matched" else " any-layer"): r["S"]
                for r in nec_rows + steer_rows
            },
            "random": {**nec_means, **steer_means},
        }
        sweep += protocol.beta_sweep(head_set) if not protocol.no_regions else []
        damage.append(protocol.damage(head_set))
        row_groups += protocol.row_groups(head_set)
        if protocol.controls:
            scheme_row = protocol.control_scheme(head_set)
            schemes += [scheme_row] if scheme_row else []
            no_scheme += [] if scheme_row else [head_set.name]
    necessity = _holm_by(pd.DataFrame(necessity), ["measure"])
    steer = _holm_by(pd.DataFrame(steer), ["control"])
    row_groups = _holm_by(pd.DataFrame(row_groups), ["row group"])
    schemes = _holm_by(pd.DataFrame(schemes), ["control"])
    sweep, damage = pd.DataFrame(sweep), pd.concat(damage, ignore_index=True)
    card = {
        "meta": {
            "model": protocol.params.model,
            "weights fingerprint": protocol.fingerprint,
            "profile": protocol.params.profile,
            "sizes": sizes,
            "eval corpus": protocol.params.eval_corpus,
            "beta": protocol.params.beta,
            "seed": protocol.params.seed,
            "head-sets": [h.name for h in sets],
            "forward copies": card_forward_copies(sizes, len(sets), protocol.controls),
            "controls": protocol.controls,
            "no control scheme": no_scheme,
        },
        "provenance": pd.DataFrame(provenance),
        "audit": audit_table,
        "necessity": necessity,
        "steerability": steer,
        "sweep": sweep,
        "damage": damage,
        "row_groups": row_groups,
        "schemes": schemes,
        "random_means": random_means,
    }
    card["meta"]["not run"] = protocol.no_regions
    model = protocol.params.model
    others = {h.name: h.record["model"] for h in sets if not headsets.same_model(h.record["model"], model)}
    if others:  # carded on purpose (heads_from_other_model): the card says so at its top
        card["meta"]["other model's head-sets"] = others
    card["verdicts"] = verdict_table(card, audits, ceilings)
    card["conclusion"] = conclusion(card)
    card["meta"]["seconds"] = round(time.time() - start, 1)
    return card
