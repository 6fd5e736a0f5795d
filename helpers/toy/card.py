"""The model card (README.md) of a toy, written into its folder from its saved config and heldout_accuracy.json.

    .venv/bin/python -m helpers.toy.card qwen2vl      # rewrites helpers/toy/models/qwen2vl/README.md
    .venv/bin/python -m helpers.toy.card toy          # the default toy's, helpers/toy/model/README.md
    .venv/bin/python -m helpers.toy.card qwen2vl --audit-pointing   # first adds the pointing suite's audit

train.py writes it after every run. A toy that misses targets says so at the top; notebook 06
reads the same JSON and reports such a toy as failing its baseline audit. `--audit-pointing` measures the
pointing suite's leak audit on a toy trained before those tasks joined the curriculum and records that they
were not in it.
"""

import json
import sys
from pathlib import Path

from transformers import AutoConfig

from helpers.sizes import PROBE_RANDOM_SETS
from helpers.stimuli.corpora import STRIP_COLUMNS, STRIP_PANELS
from helpers.storage.paths import HELPERS, TOY_MODEL, toy_folder
from helpers.toy.build import DEPTH_DEFAULTS, LLAVA_IMAGE_SIZE, LLAVA_PATCH, MERGE_SIZE
from helpers.toy.evaluate import THRESHOLDS

TASK_NAMES = {
    "strip_ord": "strip ordinal",
    "strip_ref": "strip referring",
    "grid": "2x2 grid MCQ",
    "grid_oracle": "grid, oracle hint",
    "single_mismatched": "single image, mismatched",
    "single_matched": "single image, matched",
    "grid_blank": "grid, blank image",
    "text": "text-solvable arm",
}


def card_text(folder: Path) -> str:
    """The markdown card of the toy saved in `folder`."""
    name = "toy" if folder == TOY_MODEL else f"toy-{folder.name}"
    shown = folder.relative_to(HELPERS.parent).as_posix()
    summary = json.loads((folder / "heldout_accuracy.json").read_text())
    chain = summary.get("chain")
    command = _command(summary) + f" --name {chain[-1]['name'] if chain else folder.name}"
    config = AutoConfig.from_pretrained(folder)
    text = config.get_text_config()
    size_mb = (folder / "model.safetensors").stat().st_size / 1e6
    results = summary["results"]
    missed = [TASK_NAMES[kind] for kind, r in results.items() if not r["passes"]]
    verdict = (
        "All eight targets are met."
        if not missed
        else f"**It misses {len(missed)} of the eight targets ({'; '.join(missed)})**: notebook 06 reports it as "
        "failing the baseline audit, and its head-level results are not evidence about a model that solves the tasks."
    )
    lines = [
        f"# Toy {config.model_type} (`{name}`, model card)",
        "",
        f"`{shown}/` is a `{config.architectures[0]}` saved with `save_pretrained`, "
        + (
            f"made by `make toy-model` (helpers.toy.chain: {len(chain)} runs, below), the last of them "
            if chain
            else ""
        )
        + f"trained by `python -m helpers.toy.train {command}`{_restarts(summary)} on the synthetic tasks, curriculum "
        "and losses of "
        "helpers/toy/README.md (TRAINING.md for the curriculum at the time of this run); load it as "
        f'`load_model("{name}")`.',
        "",
        f"- {text.num_hidden_layers} text layers x {text.num_attention_heads} query heads "
        f"({text.num_key_value_heads} kv heads, hidden {text.hidden_size}); fp32, {size_mb:.1f} MB; "
        f"seed {summary['seed']}.",
        *_recipe_lines(summary),
        _training_line(summary),
        "",
        *_chain_lines(chain),
        f"## Held-out accuracy (the eight targets; {next(iter(results.values()))['n']} items per task, seed 777)",
        "",
        "| task | metric | target | result (cm / co) | met |",
        "|---|---|---|---|---|",
    ]
    for kind, (metric, low, high) in THRESHOLDS.items():
        r = results[kind]
        target = f">= {low:.2f}" if high == 1.0 else f"{low:.2f}-{high:.2f}"
        lines.append(
            f"| {TASK_NAMES[kind]} | {metric.replace('_', ' ')} | {target} | {r['value']:.3f} "
            f"({r['cm']:.2f} / {r['co']:.2f}) | {'yes' if r['passes'] else '**no**'} |"
        )
    return "\n".join([*lines, "", verdict, "", *_probe_lines(summary), *_pointing_lines(summary)])


def _chain_lines(chain: list[dict] | None) -> list[str]:
    """The stages that made the default toy (helpers.toy.chain), each a train.py run from the one before."""
    if not chain:
        return []
    lines = [
        "## The chain of runs (`make toy-model`, helpers/toy/chain.py; TRAINING.md says why each stage exists)",
        "",
        "| stage | folder | started from | recipe | steps | minutes (budget) |",
        "|---|---|---|---|---|---|",
    ]
    for number, stage in enumerate(chain, 1):
        recipe = stage["recipe"]
        shown = ", ".join(f"{key} {value:g}" for key, value in recipe.items() if key in _CHAIN_SHOWN)
        lines.append(
            f"| {number} | `models/{stage['name']}` | {stage['init_from'] or 'an initialisation'} | {shown} | "
            f"{stage['steps']} | {stage['train_seconds'] / 60:.1f} ({recipe['max_minutes']:g}) |"
        )
    total = sum(stage["train_seconds"] for stage in chain) / 60
    return [*lines, "", f"In all {total:.0f} min of training on one thread; the last stage's folder is this one.", ""]


_CHAIN_SHOWN = ("drophead", "image_word_weight", "layer_image_drop", "option_smoothing")


def _probe_lines(summary: dict) -> list[str]:
    """The depth and saturation profile (helpers.toy.probe) measured at the end of the run; absent from runs
    before the probe existed (`python -m helpers.toy.probe toy-<name>` measures them)."""
    profile = summary.get("probe")
    if not profile:
        return []
    k = profile["k"]
    odds = profile["clean log-odds"]
    lines = [
        f"## Depth and saturation (helpers/toy/probe.py; {profile['n_items']} `{profile['corpus']}` item pairs)",
        "",
        "| layer | " + " | ".join(str(layer) for layer in range(len(profile["layer ncs"]))) + " |",
        "|---|" + "---|" * len(profile["layer ncs"]),
        "| NCS, image hidden from this layer | " + " | ".join(f"{v:.3f}" for v in profile["layer ncs"]) + " |",
        "| NCS, layers 0 to this one | " + " | ".join(f"{v:.3f}" for v in profile["cumulative ncs"]) + " |",
        "",
        f"- The largest single layer carries {profile['largest layer share']:.2f} of the NCS of hiding every layer "
        f"({profile['all layers ncs']:.3f}).",
        f"- Clean log-odds of the correct letter on matched items: median {odds['median']:.2f} nats (10-90 %: "
        f"{odds['p10']:.2f}-{odds['p90']:.2f}); median P(correct) {profile['clean p median']:.5f}.",
    ]
    for size, random in profile["random"].items():
        lines.append(
            f"- {size} uniform random heads ({PROBE_RANDOM_SETS} sets): "
            f"NCS {random['ncs']['mean']:.4f} +- {random['ncs']['sd']:.4f}, "
            f"matched P drop {random['p drop']['mean']:.4f} +- {random['p drop']['sd']:.4f}, "
            f"log-odds drop {random['log-odds drop']['mean']:.2f} +- {random['log-odds drop']['sd']:.2f} nats"
            + (" (k)." if int(size) == k else " (2k).")
        )
    return [*lines, ""]


def _pointing_lines(summary: dict) -> list[str]:
    """The pointing suite's leak audit on held-out items (absent from runs trained before its tasks joined the
    curriculum): the audit notebook 06 runs before it scores a task."""
    audits = summary.get("pointing")
    if not audits:
        return ["The pointing suite's tasks were not in this toy's curriculum; notebook 06 audits them.", ""]
    n = next(iter(audits.values()))["n"]
    trained = summary.get("pointing_in_curriculum", True)
    lines = [
        f"## Pointing suite (leak audit, {n} held-out items per task, seed 777)",
        "",
        "Mean P(correct): oracle and matched should be >= 0.80, blank and mismatched 0.15-0.35."
        + ("" if trained else " These tasks were not in this toy's curriculum (it predates them): measured after."),
        "",
        "| task | plain accuracy | oracle | matched | blank | mismatched | passes |",
        "|---|---|---|---|---|---|---|",
    ]
    for task, row in audits.items():
        passes = "yes" if row["passes"] else f"**no** ({row['flagged']})"
        lines.append(
            f"| {task} | {row['plain accuracy']:.3f} | {row['oracle']:.3f} | {row['matched']:.3f} | "
            f"{row['blank']:.3f} | {row['mismatched']:.3f} | {passes} |"
        )
    passing = sum(row["passes"] for row in audits.values())
    return [*lines, "", f"{passing} of {len(audits)} pointing tasks pass the leak audit.", ""]


def _restarts(summary: dict) -> str:
    """ ", then `--restart --max-minutes M`" for each further cycle of the schedule (train.py --restart)."""
    return "".join(
        f", then with `--restart --max-minutes {c['max_minutes']:g}`" for c in summary.get("cycles", [])[1:]
    )


def _training_line(summary: dict) -> str:
    """Steps, minutes and threads of the run, cycle by cycle when it was restarted."""
    cycles = summary.get("cycles") or [summary]
    steps = " + ".join(str(c["steps"]) for c in cycles)
    minutes = " + ".join(f"{c['train_seconds'] / 60:.1f}" for c in cycles)
    budgets = " + ".join(f"{c['max_minutes']:g}" for c in cycles)
    restarted = (
        f"; {len(cycles)} cycles of the schedule, each after the first a warm restart from the previous one's weights"
        if len(cycles) > 1
        else ""
    )
    return (
        f"- Training: {steps} steps of batch {summary['batch_size']} in {minutes} min (torch threads: "
        f"{summary['threads']}, budget {budgets} min{restarted}; TRAINING.md says what ran beside it)."
    )


def _command(summary: dict) -> str:
    """The training command's arguments that made this toy (runs from before the graded recipe had merge 4 and
    no DropHead, the defaults then)."""
    depth = "".join(
        f" --{key.replace('_', '-')} {summary[key]:g}"
        for key, default in DEPTH_DEFAULTS.items()
        if summary.get(key, default) != default
    )
    origin = summary.get("initialised_from")
    depth = (f" --init-from {origin['toy']}" if origin else "") + depth
    return (
        f"--family {summary['family']} --seed {summary['seed']} --max-minutes {summary['max_minutes']:g} "
        f"--merge-size {summary.get('merge_size') or MERGE_SIZE} --drophead {summary.get('drophead') or 0:g}" + depth
    )


def _recipe_lines(summary: dict) -> list[str]:
    """The graded-toy settings of the run (absent from runs before they existed), each with its reason, chosen
    before training and never tuned on a paper-facing number."""
    lines = []
    merge = summary.get("merge_size")
    if summary.get("family") == "llava":
        side = LLAVA_IMAGE_SIZE // LLAVA_PATCH
        panel = f"{side // STRIP_COLUMNS} x {side // (STRIP_PANELS // STRIP_COLUMNS)}"  # columns x rows of tokens
        lines.append(
            f"- Image tokens: CLIP patches of {LLAVA_PATCH} px on a {LLAVA_IMAGE_SIZE}-px square, {side} x {side} per "
            f"image: a strip panel is {panel} tokens, a grid cell {side // 2} x {side // 2}, a single image all of "
            "them (no merge)."
        )
    elif merge is not None:
        tokens = f"{64 // (16 * merge)} x {64 // (16 * merge)}"
        reason = (
            "Qwen3-VL's own 2 x 2 merge, so a mask, a steer or a discovery score acts on several keys per region, "
            "as in a real VLM"
            if merge == 2
            else "the modular toy's merge: one token holds a whole object"
        )
        lines.append(
            f"- Image tokens: patch 16, merge {merge} x {merge}: a 64-px region is {tokens} tokens ({reason})."
        )
    lines += _depth_recipe_lines(summary)
    p = summary.get("drophead")
    if p:
        lines.append(
            f"- DropHead p = {p:g} on every text layer (each head's output dropped per sequence, the kept heads "
            "rescaled; Zhou et al. 2020, arXiv 2004.13342), constant instead of their schedule: redundancy, so that "
            "no single head carries the image alone; p fixed before training at one head in five per sequence."
        )
    return lines


def _depth_recipe_lines(summary: dict) -> list[str]:
    """The depth recipe's settings (TRAINING.md, issue #54) where a run used them."""
    lines = []
    origin = summary.get("initialised_from")
    if origin:
        lines.append(
            f"- Started from the weights of `{origin['toy']}` ({origin['steps']} steps), not from an initialisation."
        )
    if summary.get("image_word_weight", DEPTH_DEFAULTS["image_word_weight"]) == 0:
        lines.append("- No image-word loss: no word is trained to be decodable from the image tokens.")
    elif summary.get("image_word_layer"):
        lines.append(
            f"- Image words read after {summary['image_word_layer']} layers, not at the language model's input: "
            "object words become decodable from image tokens in middle layers, as in real VLMs (Neo et al. 2024)."
        )
    if summary.get("layer_image_drop"):
        lines.append(
            f"- Layer image drop p = {summary['layer_image_drop']:g}: per sequence and text layer, the image hidden "
            "from every head of the layer (LayerDrop's rate, Fan et al. 2019), so that no single layer must read it."
        )
    if summary.get("option_smoothing"):
        eps = summary["option_smoothing"]
        lines.append(
            f"- Label smoothing among the four option letters, eps = {eps:g}: P(correct) trained to {1 - eps:g} "
            "(the paper's model near 0.995 on matched items, its Table 11)."
        )
    return lines


def write_card(folder: Path) -> None:
    (folder / "README.md").write_text(card_text(folder))


def add_pointing_audit(folder: Path) -> None:
    """Measure the pointing suite's leak audit (evaluate.pointing_audit, 100 items per task) on a toy trained before
    those tasks joined the curriculum, and record it in its heldout_accuracy.json as measured after training."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from helpers.toy.evaluate import pointing_audit

    path = folder / "heldout_accuracy.json"
    summary = json.loads(path.read_text())
    model = AutoModelForImageTextToText.from_pretrained(folder)
    summary |= {
        "pointing": pointing_audit(model, AutoProcessor.from_pretrained(folder)),
        "pointing_in_curriculum": False,
    }
    path.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    folder = toy_folder(sys.argv[1] if sys.argv[1].startswith("toy") else f"toy-{sys.argv[1]}")
    if "--audit-pointing" in sys.argv:
        add_pointing_audit(folder)
    write_card(folder)
