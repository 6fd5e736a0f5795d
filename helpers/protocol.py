"""The paper's reporting protocol as a report card for any model and head-set (notebook 07_protocol).

    python -m helpers.protocol --model toy --heads data/headsets/co-ref-qsp.json            # quick profile
    python -m helpers.protocol --model PATH --heads my_heads.json --profile paper --out DIR
    python -m helpers.protocol --model toy --heads scores.npy --k 11 -p n_items 20          # imported scores
    python -m helpers.protocol --model toy --method gaze                                    # a published method

With `--method NAME` (gaze, ver, localization, sparsemm, ocr, retrieval, qrhead, ablation, attribution: the
methods of helpers/measures/methods, notebook 08) the card (notebook 07's `method`) first scores every head with
the method on notebook 08's strips (its n_items, through the result cache) on the model it loads for the card, so
the model loads once, saves the top-k set (k: `--k`, else 08's) as a head-set file with the method's provenance
(method, citation, parameters) in the run folder's headsets/, and cards it beside any `--heads`. An unknown
method, or a region method on a family that maps no region, is refused before any model loads.

The command runs notebooks/07_protocol.py through the same runner and cache as every notebook
(helpers/run.py, one run folder) and the notebook writes report.md and report.html beside its executed
copy. For each head-set S the card holds:

- provenance: the model and its weights fingerprint; what the discovery score was (setting, corpus,
  query, source, k, selection); the half-split noise ceiling of its discovery data where known;
- the baseline audit of the evaluation data (helpers/measures/baselines.py);
- necessity: NCS and NCS_grid against layer-matched random sets (rank p with its floor, z, effect with
  an interval, Holm across the head-sets given);
- steerability: CERS against layer-matched and any-layer random sets at the chosen beta, a beta sweep;
- generic damage (attention sinks, text-heavy heads, whole layers, random 2k / 4k heads) and the row
  groups where necessity acts (all / question + option / last);
- with `--controls SCHEME` (`controls`), a control-scheme line: NCS against the random sets one of the
  field's control schemes draws (helpers/measures/control_schemes.py: bottom5, same-band, ...), its
  verdict beside the layer-matched one;
- a verdict table (helpers/studies/verdicts.py) and a conclusion built from its rows.

Every run goes through the result cache with the same draws as notebooks 03-05 (the named streams of
helpers/sizes.py, keyed by the set's name), so a discovery set that those notebooks ran is read back.
"""

import argparse
import base64
import io
import json
import time
from dataclasses import dataclass, replace
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from helpers import sizes
from helpers.engine import HIDE, load_model
from helpers.engine.loading import model_fingerprint
from helpers.measures import control_schemes
from helpers.measures.baselines import audit
from helpers.measures.controls import (
    any_layer_sets,
    layer_matched_controls,
    spill_note,
    with_controls,
)
from helpers.measures.discovery import discover, setting_scores
from helpers.measures.methods import METHODS, PER_ITEM, check_method
from helpers.measures.methods.cached import method_run
from helpers.measures.methods.ceiling import half_split_ceiling
from helpers.measures.necessity import ncs
from helpers.measures.overlap import half_split_overlaps, split_halves
from helpers.measures.stats import against_random, holm, t_interval
from helpers.measures.steering import cers, ncs_grid
from helpers.runner.params import declared_parameters
from helpers.sizes import CARD_SIZES, card_forward_copies, card_sizes
from helpers.stimuli.design import SETTINGS, parse_setting
from helpers.storage import headsets, paths, runs
from helpers.storage.cache import ResultCache
from helpers.studies import verdicts
from helpers.studies.evaluation import Evaluation


@dataclass
class HeadSet:
    name: str  # shown in every table; names its random streams (a setting's: those of 03-05)
    path: Path
    record: dict  # the validated head-set file (helpers/storage/headsets.py) with its mask

    @property
    def mask(self) -> np.ndarray:  # [L, H] bool
        return self.record["mask"]

    @property
    def k(self) -> int:
        return int(self.mask.sum())

    @property
    def setting(self) -> str | None:
        """The discovery setting the set came from, when it is one of the 12."""
        return self.record.get("setting") if self.record.get("setting") in SETTINGS else None


def resolve_head_sets(entries, data_dir: Path, model: str, n_layers: int, n_heads: int, k=None) -> list[HeadSet]:
    """Head-set files (any form headsets.read_any takes) or discovery setting names (read from
    `data_dir/headsets/`) -> HeadSets checked against the model's L x H."""
    out = []
    for entry in entries:
        path = Path(data_dir) / "headsets" / f"{entry}.json" if entry in SETTINGS else Path(entry)
        if entry in SETTINGS and not path.exists():
            raise FileNotFoundError(f"no head-set file {path} for setting {entry!r}: run 01_discovery first")
        record = headsets.read_any(path, model, n_layers, n_heads, k)
        setting = record.get("setting")
        name = setting if setting in SETTINGS and path.stem == setting else path.stem
        out.append(HeadSet(name=name, path=path, record=record))
    names = [h.name for h in out]
    if len(set(names)) != len(names):
        raise ValueError(f"head-sets {names} share a name; give each file its own name")
    return out


class Protocol(Evaluation):
    """The model, the cache and the sizes of one report card; the cached runs (`Evaluation`: steer, mask)
    are notebooks 03-05's calls at this card's item count, so a card on a discovery setting reads them back."""

    def __init__(self, params):
        self.params = params
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
        stream = sizes.stream(self.params.seed, "table03/any-layer/{setting}", setting=head_set.name)
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
        # 01's own strips per forward: the cache is chunked by it, so 01's scores are read back
        strips_per_forward = declared_parameters("01_discovery")["strips_per_forward"]
        per_item = discover(self.lm, s.corpus, s.query, n_strips, p.seed, self.cache, strips_per_forward)
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
        """S against its random sets from per-item values [N, 1 + R]: against_random (over the `distinct` random
        columns where the draw repeats sets) plus the effect (per-item excess over the random sets' mean, with its
        t-interval) and the rank p's floor."""
        row = against_random(values[:, 0], values[:, 1:], distinct)
        random = values[:, 1:] if distinct is None else values[:, 1:][:, distinct]
        effect, effect_low, effect_high = t_interval(values[:, 0] - random.mean(1))
        return {
            **row,
            "effect": effect,
            "effect low": effect_low,
            "effect high": effect_high,
            "p floor": 1 / (random.shape[1] + 1),
        }

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
        keyed by the set's name (a setting's: notebook 05's draws): a row as `necessity`'s, with the draws' mean
        size; the unseeded scheme pools one set per seed and adds the per-seed spread. None when bottom5 has no
        score map for the set."""
        scheme, r, seed = self.controls, self.sizes["n_random"], self.params.seed
        scores = self.score_map(head_set) if scheme == "bottom5" else None
        if scheme == "bottom5" and scores is None:
            return None
        if scheme == "unseeded":
            per_seed = control_schemes.unseeded_sets(head_set.mask, head_set.name, 1, seed)  # [seeds, 1, L, H]
            sets = per_seed[:, 0]
        else:
            sets = control_schemes.scheme_sets(scheme, head_set.mask, head_set.name, r, seed, scores)
        unique, inverse = control_schemes.unique_sets(with_controls(head_set.mask, sets))
        values = ncs(self.mask(unique))[:, inverse]  # [N, 1 + n]
        row = {
            "head-set": head_set.name,
            "measure": "NCS",
            "control": scheme,
            "heads": float(sets.sum((1, 2)).mean()),
            **self.against(values, control_schemes.distinct_columns(sets)),
        }
        if scheme == "unseeded":  # each seed's one set alone, judged by the one rule
            calls = [
                verdicts.judge(against_random(values[:, 0], values[:, [j]])).outcome for j in range(1, len(sets) + 1)
            ]
            row["seeds"], row["R per seed"] = len(sets), 1
            row["seeds beating"] = calls.count(verdicts.BEATS)
            row["seeds not interpretable"] = calls.count(verdicts.NOT_INTERPRETABLE)
        return row

    def row_groups(self, head_set: HeadSet) -> list[dict]:
        """NCS with the image hidden from S at every row, the question + option rows, the last row (04's Table 5)."""
        stack = self.layer_matched(head_set)
        return [
            {"head-set": head_set.name, "rows": rows, **self.against(ncs(self.mask(stack, rows)))}
            for rows in ("all", "prompt", "last")
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
    provenance, ceilings, necessity, steer, sweep, damage, rows, random_means = [], {}, [], [], [], [], [], {}
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
        rows += protocol.row_groups(head_set)
        if protocol.controls:
            scheme_row = protocol.control_scheme(head_set)
            schemes += [scheme_row] if scheme_row else []
            no_scheme += [] if scheme_row else [head_set.name]
    necessity = _holm_by(pd.DataFrame(necessity), ["measure"])
    steer = _holm_by(pd.DataFrame(steer), ["control"])
    rows = _holm_by(pd.DataFrame(rows), ["rows"])
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
        "rows": rows,
        "schemes": schemes,
        "random_means": random_means,
    }
    card["meta"]["not run"] = protocol.no_regions
    card["verdicts"] = verdict_table(card, audits, ceilings)
    card["conclusion"] = conclusion(card)
    card["meta"]["seconds"] = round(time.time() - start, 1)
    return card


def verdict_table(card: dict, audits: list, ceilings: dict) -> pd.DataFrame:
    """One verdict per check and head-set, after the audit's own rows; a check the model's family cannot run
    (card["meta"]["not run"]: the region checks without a region mapping) is "not run" with that reason."""
    sizes, n_sets, not_run = card["meta"]["sizes"], len(card["meta"]["head-sets"]), card["meta"]["not run"]
    nec = card["necessity"].set_index(["head-set", "measure"])
    steer = card["steerability"].set_index(["head-set", "control"]) if not not_run else None
    rows = card["rows"].set_index(["head-set", "rows"])
    scheme = card["meta"].get("controls")
    schemes = card["schemes"].set_index("head-set") if len(card.get("schemes", [])) else None
    out = list(audits)
    for name in card["meta"]["head-sets"]:
        if not_run:
            out.append(verdicts.Verdict(name, "discovery noise ceiling", verdicts.NOT_RUN, "--", not_run))
        else:
            out.append(verdicts.ceiling_verdict(name, ceilings[name]))
        for measure in ("NCS", "NCS_grid"):
            check = f"{measure} vs layer-matched"
            if (name, measure) not in nec.index:
                out.append(verdicts.Verdict(name, check, verdicts.NOT_RUN, "--", not_run))
                continue
            out.append(
                verdicts.against_random_verdict(
                    name, check, nec.loc[(name, measure)].to_dict(), sizes["n_random"], n_sets, audits
                )
            )
            if measure == "NCS" and scheme:
                out.append(scheme_verdict(name, scheme, schemes, n_sets, audits))
        for control, r in (("layer-matched", sizes["n_random"]), ("any-layer", sizes["n_random_any"])):
            check = f"CERS vs {control}"
            if steer is None:
                out.append(verdicts.Verdict(name, check, verdicts.NOT_RUN, "--", not_run))
                continue
            out.append(
                verdicts.against_random_verdict(name, check, steer.loc[(name, control)].to_dict(), r, n_sets, audits)
            )
        if not_run:
            out.append(verdicts.Verdict(name, "CERS beta sweep", verdicts.NOT_RUN, "--", not_run))
        else:
            out.append(verdicts.sweep_verdict(name, card["sweep"][card["sweep"]["head-set"] == name], audits))
        s_low = nec.loc[(name, "NCS"), "S low"]
        out.append(verdicts.damage_verdict(name, s_low, card["damage"][card["damage"]["head-set"] == name], audits))
        for group, check in (("prompt", "NCS at question + option rows"), ("last", "NCS at the last row")):
            row = rows.loc[(name, group)].to_dict()
            out.append(verdicts.against_random_verdict(name, check, row, sizes["n_random"], n_sets, audits))
    return verdicts.as_frame(out)


def scheme_verdict(name: str, scheme: str, schemes: pd.DataFrame | None, n_sets: int, audits: list):
    """The card's control-scheme line: NCS against `scheme`'s random sets, judged as the layer-matched line
    (Holm across the head-sets); "not run" where bottom5 has no score map for the set."""
    check = f"NCS vs {scheme}"
    if schemes is None or name not in schemes.index:
        reason = "the bottom5 draw needs every head's discovery score (a setting in the data folder or a score matrix)"
        return verdicts.Verdict(name, check, verdicts.NOT_RUN, "--", reason)
    row = schemes.loc[name].to_dict()
    verdict = verdicts.against_random_verdict(name, check, row, int(row["R"]), n_sets, audits)
    if scheme == "unseeded":  # one set per seed: the single-draw call of each seed, by the same rule
        seeds, beats, unread = int(row["seeds"]), int(row["seeds beating"]), int(row["seeds not interpretable"])
        spread = (
            f"; each seed's one set alone: beats random at {beats} of {seeds} seeds, not interpretable at {unread}"
        )
        return replace(verdict, number=verdict.number + spread)
    return verdict


CONCLUDE = {
    "NCS vs layer-matched": {
        verdicts.PASS: "is necessary beyond its layer-matched random sets",
        verdicts.FAIL: "is not more necessary than its layer-matched random sets",
        verdicts.NOT_INTERPRETABLE: "cannot be judged on necessity",
        verdicts.NOT_RUN: "was not judged on necessity",
    },
    "CERS vs layer-matched": {
        verdicts.PASS: "steers more than its layer-matched random sets",
        verdicts.FAIL: "does not steer more than its layer-matched random sets",
        verdicts.NOT_INTERPRETABLE: "cannot be judged on steerability",
        verdicts.NOT_RUN: "was not judged on steerability",
    },
}


def conclusion(card: dict) -> list[str]:
    """One sentence on the evaluation data and one per head-set, built only from the verdict rows."""
    table = card["verdicts"]
    audit_rows = table[table["head-set"] == "(evaluation data)"]
    bad = audit_rows[audit_rows["verdict"] != verdicts.PASS]
    if len(bad):
        failed = "; ".join(f"{c.removeprefix('baseline: ')}: {n}" for c, n in zip(bad["check"], bad["number"]))
        lines = [f"The evaluation data fail the baseline audit ({failed}): the checks resting on them are not scored."]
    else:
        lines = ["The evaluation data pass the baseline audit (oracle, blank floor, matched, mismatched)."]
    for name in card["meta"]["head-sets"]:
        rows = table[table["head-set"] == name].set_index("check")
        claims = [
            f"{CONCLUDE[check][rows.loc[check, 'verdict']]} ({check.split()[0]}: {rows.loc[check, 'number']}; "
            f"{rows.loc[check, 'reason']})"
            for check in CONCLUDE
        ]
        tally = verdicts.counts(rows.reset_index())
        lines.append(
            f"{name} {claims[0]}, and {claims[1]}. Of its {len(rows)} checks, "
            + ", ".join(f"{n} {v}" for v, n in tally.items() if n)
            + "."
        )
    return lines


# ------------------------------------------------------------------------------------ the report files

SECTIONS = [
    ("provenance", "Provenance", "the model, how the head-set was discovered, its half-split noise ceiling"),
    ("audit", "Baseline audit of the evaluation data", "clean P(correct) with a 95% t-interval over items"),
    ("necessity", "Necessity", "NCS and NCS_grid (95% t-intervals over items) against layer-matched random sets"),
    ("steerability", "Steerability", "CERS at the chosen beta against layer-matched and any-layer random sets"),
    ("sweep", "CERS against beta", "S and its first layer-matched random sets (mean, min, max)"),
    (
        "damage",
        "Generic damage",
        "matched / mismatched drops with the image hidden; text-arm drop with the text hidden",
    ),
    (
        "rows",
        "Where necessity acts",
        "NCS with the image hidden from S at every row, question + option rows, the last row",
    ),
    (
        "schemes",
        "Control scheme",
        "NCS against the random sets of the field's control scheme given with --controls (bottom5: the lowest 5% "
        "of the discovery score; same-band: S's count per third of the layers; uniform: from all heads)",
    ),
]
OPTIONAL_SECTIONS = ("schemes",)  # shown only when the card has rows for them


def _cell(value) -> str:
    if isinstance(value, (float, np.floating)):
        return "--" if np.isnan(value) else f"{value:.3f}"
    return str(value).replace("|", "/")


def markdown_table(df: pd.DataFrame) -> str:
    """A pipe table of `df` (floats to 3 decimals, NaN as --)."""
    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def _header(card: dict) -> list[str]:
    meta, sizes = card["meta"], card["meta"]["sizes"]
    copies = sum(meta["forward copies"].values())
    return [
        f"model {meta['model']} (weights {meta['weights fingerprint']}), profile {meta['profile']}: "
        f"N = {sizes['n_items']} evaluation items of corpus {meta['eval corpus']}, R = {sizes['n_random']} "
        f"layer-matched and {sizes['n_random_any']} any-layer random sets, beta = {meta['beta']:g}, "
        f"seed {meta['seed']}; "
        f"{copies:,} forward copies, {meta['seconds']:.0f} s",
    ]


def to_markdown(card: dict, figure_name: str | None = None) -> str:
    meta = card["meta"]
    out = [f"# Report card: {', '.join(meta['head-sets'])}", "", *_header(card), "", "## Verdicts", ""]
    out += [markdown_table(card["verdicts"]), "", "## Conclusion", "", *[f"- {line}" for line in card["conclusion"]]]
    if figure_name:
        out += ["", f"![S against its random sets](../{figure_name}.png)"]
    for key, title, caption in SECTIONS:
        if key in OPTIONAL_SECTIONS and not len(card.get(key, [])):
            continue
        out += ["", f"## {title}", "", f"{caption}.", "", markdown_table(card[key])]
    return "\n".join(out) + "\n"


def to_html(card: dict, fig: plt.Figure | None = None) -> str:
    """A self-contained HTML page of the card (the figure embedded as a PNG)."""
    meta = card["meta"]
    body = [f"<h1>Report card: {', '.join(meta['head-sets'])}</h1>", *[f"<p>{line}</p>" for line in _header(card)]]
    body += ["<h2>Verdicts</h2>", card["verdicts"].to_html(index=False, classes="verdicts", border=0)]
    body += ["<h2>Conclusion</h2>", "<ul>", *[f"<li>{line}</li>" for line in card["conclusion"]], "</ul>"]
    if fig is not None:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
        encoded = base64.b64encode(buffer.getvalue()).decode()
        body.append(f'<img alt="S against its random sets" src="data:image/png;base64,{encoded}">')
    for key, title, caption in SECTIONS:
        if key in OPTIONAL_SECTIONS and not len(card.get(key, [])):
            continue
        body += [
            f"<h2>{title}</h2>",
            f"<p>{caption}.</p>",
            card[key].to_html(index=False, float_format="%.3f", na_rep="--", border=0),
        ]
    style = (
        "body{font-family:sans-serif;max-width:1200px;margin:auto}table{border-collapse:collapse;font-size:13px}"
        "td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left}img{max-width:100%}"
    )
    head = f"<head><meta charset='utf-8'><title>Report card</title><style>{style}</style></head>"
    return f"<!DOCTYPE html><html>{head}<body>{''.join(body)}</body></html>\n"


def write_report(
    card: dict, folder: Path, fig: plt.Figure | None = None, figure_name: str | None = None
) -> list[Path]:
    """report.md, report.html and card.json (the card's numbers) into `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    md, html, record = folder / "report.md", folder / "report.html", folder / "card.json"
    md.write_text(to_markdown(card, figure_name))
    html.write_text(to_html(card, fig))
    tables = {key: value.to_dict(orient="records") for key, value in card.items() if isinstance(value, pd.DataFrame)}
    record.write_text(
        json.dumps({"meta": card["meta"], "conclusion": card["conclusion"], **tables}, indent=1, default=float)
    )
    return [md, html, record]


# ----------------------------------------------------------------------------------------- the command


def method_head_set(lm, method: str, params, folder: Path, k: int | None = None) -> Path:
    """Discover a head-set with the published `method` (helpers/measures/methods) on the loaded model `lm`, on
    notebook 08's strips at the card's seed, profile and smoke (08's n_items, through the card's result cache), and
    save its top-k (k, else 08's k) as `<folder>/<method>.json` with the method's provenance."""
    from helpers.measures.methods import citation
    from helpers.measures.methods.cached import ITEMS, method_score
    from helpers.measures.overlap import top_k
    from helpers.runner import params as checks
    from helpers.stimuli.design import k_for

    declared = declared_parameters("08_methods")
    n_items = checks.validate(
        {"n_items": declared["n_items"], "profile": params.profile, "smoke": params.smoke}
    ).n_items
    score = method_score(lm, method, n_items, params.seed, ResultCache(params.cache_dir))
    k = k_for(score.size, declared["k"] if k is None else k)
    path = Path(folder) / f"{method}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    provenance = {
        "method": method,
        "citation": citation(method),
        "parameters": {"n_items": n_items, "strips": ITEMS, "seed": params.seed, "k": k, "dtype": params.dtype},
    }
    selection = f"flat top-{k} of the {method} score over {n_items} strips (helpers/measures/methods)"
    headsets.save(
        path, model=params.model, setting=method, selection=selection, mask=top_k(score, k), scores=score,
        provenance=provenance,
    )  # fmt: skip
    return path


def refuse_unservable(method: str, model: str) -> None:
    """A region method on a family that maps no pixel region to tokens: a ValueError, before any model loads."""
    from helpers.measures.methods import REGION_METHODS
    from helpers.runner import params as checks

    adapter = checks.model_adapter(model)
    if method in REGION_METHODS and adapter is not None and not adapter.maps_regions:
        raise ValueError(f"method {method!r} reads the image tokens of regions. {adapter.no_region_mapping}")


def main(argv=None) -> None:
    from helpers import run  # the runner (papermill) is not needed where the notebook imports this module

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="toy", help="toy, a local save_pretrained folder or a hub id")
    parser.add_argument("--heads", nargs="+", default=[], help="head-set files (json, npy, csv) or setting names")
    parser.add_argument(
        "--method",
        help="discover a head-set with a published method first (helpers/measures/methods): " + ", ".join(METHODS),
    )
    parser.add_argument("--profile", choices=("quick", "paper"), default="quick", help="quick: the 'default' sizes")
    parser.add_argument("--k", type=int, help="heads to take from an imported score file")
    parser.add_argument("--out", help="the run folder (default: runs/<model>-<hash>/)")
    parser.add_argument(
        "--controls",
        help="a control scheme for an NCS line beside the layer-matched one: " + ", ".join(sizes.CONTROL_SCHEMES),
    )
    parser.add_argument(
        "-p",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="a notebook parameter (device, dtype, beta, ...) or a size (n_items, n_random, ...)",
    )
    args = parser.parse_args(argv)
    if args.method is not None:
        check_method(args.method)  # a ValueError naming the allowed methods, before any model loads
        refuse_unservable(args.method, args.model)
    if not args.heads and args.method is None:
        parser.error("give --heads, --method, or both")
    if args.controls is not None:
        control_schemes.check_scheme(args.controls)  # a ValueError naming the scheme, before any run
    heads = [h if h in SETTINGS else str(Path(h).expanduser().resolve()) for h in args.heads]
    given = {name: run.parse_value(value) for name, value in args.p}
    size_overrides = {n: given.pop(n) for n in list(given) if n in CARD_SIZES["default"]}
    profile = "default" if args.profile == "quick" else args.profile
    overrides = {"model": args.model, "heads": heads, "profile": profile, **given}
    if size_overrides:
        overrides["sizes"] = size_overrides
    if args.k is not None:
        overrides["import_k"] = args.k
    if args.controls is not None:
        overrides["controls"] = args.controls
    overrides = run._resolve_paths(overrides)
    folders = (
        runs.in_folder(Path(args.out).expanduser().resolve()) if args.out else runs.scratch(args.model, overrides)
    )
    # setting names are read from the model's default data folder (where 01_discovery writes), unless given
    data = Path(overrides.pop("data_dir")) if "data_dir" in overrides else runs.folders_for(args.model, {}).data
    folders = replace(folders, data=data)
    print(f"run folder: {folders.out}", flush=True)
    if args.method is not None:
        overrides["method"] = args.method  # discovered in the card's kernel, on the model it loads for the card
    source = paths.NOTEBOOKS / "07_protocol.py"
    timings = run.run([source], overrides, paths.BUILD / "runner" / folders.out.name, folders)
    run.write_run_json(folders, overrides, timings)
    print(f"report: {folders.notebooks / 'report.md'} and report.html ({timings['07_protocol']:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
