"""The verdict table of a report card (one verdict per check and head-set, helpers/measures/verdicts.py) and the
conclusion built from its rows."""

from dataclasses import replace

import pandas as pd

from helpers.measures import verdicts


def verdict_table(card: dict, audits: list, ceilings: dict) -> pd.DataFrame:
    """One verdict per check and head-set, after the audit's own rows; a check the model's family cannot run
    (card["meta"]["not run"]: the region checks without a region mapping) is "not run" with that reason."""
    sizes, n_sets, not_run = card["meta"]["sizes"], len(card["meta"]["head-sets"]), card["meta"]["not run"]
    nec = card["necessity"].set_index(["head-set", "measure"])
    steer = card["steerability"].set_index(["head-set", "control"]) if not not_run else None
    row_groups = card["row_groups"].set_index(["head-set", "row group"])
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
        for row_group, check in (("prompt", "NCS at question + option rows"), ("last", "NCS at the last row")):
            row = row_groups.loc[(name, row_group)].to_dict()
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
