"""The head-set explorer: pick a run, a setting and k; see the score map with the set outlined, its
overlap with a second setting, one strip's image under a chosen head's attention, and the set's NCS and
CERS against the histogram of its layer-matched random sets.

    show_explorer(model="toy")            # in a notebook (01, 02 and 07 call it when interactive=True)

``ExplorerData`` reads what the notebooks left behind (a run's ``data/discovery_scores.csv`` and the
result cache) and computes only what is missing, through the same cached runs as notebooks 03-05, with
their progress bars. The panels are the plain functions of helpers/figures/explorer.py; ``Explorer``
only wires ipywidgets controls to them.
"""

import io
from functools import cache
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from helpers.engine import build_batch, load_model
from helpers.engine.mcq import greedy_answers
from helpers.figures.explorer import plot_attention_overlay, plot_overlap_map, plot_random_histograms, plot_score_map
from helpers.measures import streams
from helpers.measures.controls import layer_matched_sets, spill_note, with_controls
from helpers.measures.discovery import read_sources
from helpers.measures.necessity import ncs, necessity_run
from helpers.measures.overlap import top_k
from helpers.measures.steering import cers, steering_run
from helpers.stimuli.corpora import Item, load_corpus, strip_items
from helpers.stimuli.design import SETTINGS, k_for, parse_setting
from helpers.storage import paths
from helpers.storage.cache import ResultCache
from helpers.storage.headsets import load_score_maps


def run_folders() -> dict[str, Path]:
    """Name -> data folder of every run that holds discovery scores: the published data, then runs/*."""
    found = {"published (data/)": paths.DATA} if (paths.DATA / "discovery_scores.csv").exists() else {}
    for scores in sorted(paths.RUNS.glob("*/data/discovery_scores.csv")):
        found[scores.parent.parent.name] = scores.parent
    return found


class ExplorerData:
    """The explorer's numbers for one model: score maps of a run, head-sets, attention, random-set scores."""

    def __init__(
        self,
        model: str = "toy",
        device: str = "cpu",
        dtype: str = "float32",
        cache_dir: Path | None = None,
        eval_corpus: str = "co",
        n_items: int = 100,
        n_random: int = 20,
        beta: float = 10.0,
        seed: int = 0,
    ):
        self.model, self.device, self.dtype = model, device, dtype
        self.cache = ResultCache(cache_dir or paths.CACHE)
        self.eval_corpus, self.n_items, self.n_random, self.beta, self.seed = (
            eval_corpus,
            n_items,
            n_random,
            beta,
            seed,
        )
        self._lm = None

    @property
    def lm(self):
        """The model, loaded on first use (score maps need none)."""
        if self._lm is None:
            self._lm = load_model(self.model, device=self.device, dtype=self.dtype)
        return self._lm

    @staticmethod
    @cache
    def score_maps(data_dir: Path) -> dict[str, np.ndarray]:
        """Setting -> mean discovery scores [L, H] from a run's discovery_scores.csv."""
        table = pd.read_csv(Path(data_dir) / "discovery_scores.csv")
        n_layers, n_heads = int(table["layer"].max()) + 1, int(table["head"].max()) + 1
        settings = [s for s in SETTINGS if s in set(table["setting"])]
        return load_score_maps(Path(data_dir) / "discovery_scores.csv", settings, n_layers, n_heads)

    @staticmethod
    def default_k(scores: np.ndarray) -> int:
        """The paper's share of heads (100 of 1,152) for a model with scores.size heads."""
        return k_for(scores.size)

    def item(self, setting: str, index: int) -> Item:
        """Held-out strip `index` of the setting's corpus and query (seed + 1: not a discovery strip)."""
        s = parse_setting(setting)
        return strip_items(load_corpus(s.corpus), index + 1, self.seed + 1, s.query)[index]

    @cache  # noqa: B019 (one explorer per notebook; items and heads are few)
    @torch.no_grad()
    def attention(self, setting: str, index: int) -> dict:
        """One strip's attention from the setting's source rows to each image token, for every head.

        Returns attention [L, H, rows, cols], the prompt's tokens and a bool [tokens] query-span mask."""
        lm, item = self.lm, self.item(setting, index)
        answers = greedy_answers(lm.model, lm.processor, [item]) if parse_setting(setting).source == "out" else None
        batch = build_batch(lm.processor, [item], answers=answers)
        positions, grid = lm.adapter.image_token_grid(batch.inputs, 0, 0)  # [rows * cols], (rows, cols)
        groups = {}
        for i, position in enumerate(positions.tolist()):
            groups[f"token {i}"] = torch.zeros(batch.inputs["input_ids"].shape, dtype=torch.bool)  # [1, T]
            groups[f"token {i}"][0, position] = True
        per_row, picked = read_sources(lm, batch, groups)  # [1, L, H, R, rows * cols], {source: [1, R]}
        rows = picked[parse_setting(setting).source][0]  # [R] bool
        mass = per_row[0][:, :, rows].mean(2).numpy()  # [L, H, rows * cols]
        prompt = batch.prompt_text_mask[0]
        ids = batch.inputs["input_ids"][0][prompt].tolist()
        return {
            "attention": mass.reshape(*mass.shape[:2], *grid),
            "tokens": [lm.processor.tokenizer.decode([i]) for i in ids],
            "query": batch.query_mask[0][prompt].numpy(),
            "item": item,
        }

    def controls_seed(self, setting: str, k: int, discovered_k: int):
        """The layer-matched stream of notebooks 03/04 at the discovered k, of 05's Table 14 at any other k."""
        if k == discovered_k:
            return streams.stream(self.seed, "layer-matched/{setting}", setting=setting)
        return streams.stream(self.seed, "table14/{setting}/k{k}", setting=setting, k=k)

    def random_scores(self, setting: str, head_set: np.ndarray, seed) -> tuple[dict, dict]:
        """S's NCS and CERS and those of its layer-matched random sets (means over items, [R] each),
        from the cache where notebooks 03-05 left them, computed otherwise."""
        stack = with_controls(head_set, layer_matched_sets(head_set, self.n_random, seed, spill=True))  # [1 + R, L, H]
        lm, corpus = self.lm, self.eval_corpus
        ncs_means = ncs(necessity_run(lm, corpus, self.n_items, self.seed, stack, "all", self.cache)).mean(0)
        cers_means = cers(steering_run(lm, corpus, self.n_items, self.seed, stack, self.beta, "all", self.cache)).mean(
            0
        )
        return {"NCS": ncs_means[0], "CERS": cers_means[0]}, {"NCS": ncs_means[1:], "CERS": cers_means[1:]}


def figure_png(fig: plt.Figure) -> bytes:
    """A figure as PNG bytes (for an ipywidgets Image), closing it."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


class Explorer:
    """ipywidgets controls wired to the panels of helpers/figures/explorer.py over ExplorerData."""

    def __init__(self, data: ExplorerData, runs: dict[str, Path] | None = None):
        import ipywidgets as w

        self.data = data
        self.runs = runs or run_folders()
        if not self.runs:
            raise FileNotFoundError("no run holds data/discovery_scores.csv: run notebook 01_discovery first")
        self.run = w.Dropdown(options=list(self.runs), description="run")
        self.setting = w.Dropdown(description="setting")
        self.second = w.Dropdown(description="vs setting")
        self.k = w.IntSlider(min=1, description="k", continuous_update=False)
        self.head = w.Dropdown(description="head")
        self.index = w.IntSlider(min=0, max=19, description="strip", continuous_update=False)
        self.compute = w.Button(
            description="NCS / CERS vs random", tooltip="reads the cache, computes what is missing"
        )
        half = w.Layout(width="49%")  # the two maps side by side, scaled to the notebook's width
        self.score_map, self.overlap = w.Image(format="png", layout=half), w.Image(format="png", layout=half)
        self.overlay, self.histograms = w.Image(format="png"), w.Image(format="png")
        self.log = w.Output()
        self.status = w.HTML()
        self._set_run()
        self.run.observe(lambda _: self._set_run(), "value")
        for control in (self.setting, self.k):
            control.observe(lambda _: self._set_head_set(), "value")
        self.second.observe(lambda _: self._draw_overlap(), "value")
        for control in (self.head, self.index):
            control.observe(lambda _: self._draw_overlay(), "value")
        self.compute.on_click(lambda _: self._draw_histograms())
        self.widget = w.VBox(
            [
                w.HBox([self.run, self.setting, self.k]),
                w.HBox([self.score_map, self.overlap]),
                w.HBox([self.second, self.head, self.index]),
                self.overlay,
                w.HBox([self.compute, self.status]),
                self.histograms,
                self.log,
            ]
        )

    @property
    def maps(self) -> dict[str, np.ndarray]:
        return self.data.score_maps(self.runs[self.run.value])

    def head_set(self) -> np.ndarray:
        """[L, H] the flat top-k of the chosen setting."""
        return top_k(self.maps[self.setting.value], self.k.value)

    def _set_run(self) -> None:
        names = list(self.maps)
        scores = self.maps[names[0]]
        self.k.max, self.k.value = scores.size, self.data.default_k(scores)
        self.discovered_k = self.k.value
        self.second.options = names
        self.second.value = names[min(1, len(names) - 1)]
        self.setting.options = names
        self.setting.value = names[0]
        self._set_head_set()

    def _set_head_set(self) -> None:
        if self.setting.value is None:
            return
        head_set = self.head_set()
        self.score_map.value = figure_png(plot_score_map(self.maps[self.setting.value], head_set, self.setting.value))
        heads = [f"L{l}H{h}" for l, h in zip(*np.nonzero(head_set))]
        self.head.options = heads
        self.head.value = heads[0]
        self._draw_overlap()
        self.histograms.value = b""
        self.histograms.layout.display = "none"  # no image until the button computes one
        self.status.value = "press the button for NCS / CERS against random sets"

    def _draw_overlap(self) -> None:
        if self.second.value is None or self.setting.value is None:
            return
        other = top_k(self.maps[self.second.value], self.k.value)
        fig = plot_overlap_map(self.head_set(), other, self.setting.value, self.second.value)
        self.overlap.value = figure_png(fig)

    def _draw_overlay(self) -> None:
        if self.head.value is None:
            return
        layer, head = map(int, self.head.value[1:].split("H"))
        with self.log:
            view = self.data.attention(self.setting.value, self.index.value)
        fig = plot_attention_overlay(
            view["item"], view["attention"][layer, head], view["tokens"], view["query"], (layer, head)
        )
        self.overlay.value = figure_png(fig)

    def _draw_histograms(self) -> None:
        setting, k = self.setting.value, self.k.value
        self.status.value = f"{setting}, top-{k}: reading the cache, computing what is missing (progress below)"
        with self.log:
            seed = self.data.controls_seed(setting, k, self.discovered_k)
            observed, random = self.data.random_scores(setting, self.head_set(), seed)
        title = f"{setting}, top-{k}: S against {self.data.n_random} layer-matched random sets"
        self.histograms.value = figure_png(plot_random_histograms(observed, random, title))
        self.histograms.layout.display = ""
        spill = spill_note(self.head_set())
        self.status.value = f"{setting}, top-{k}: done" + (f" (the random sets borrow {spill})" if spill else "")


def show_explorer(
    model: str = "toy", device: str = "cpu", dtype: str = "float32", cache_dir=None, **sizes
) -> Explorer:
    """Build the explorer for `model` over every run with discovery scores and display it."""
    from IPython.display import display

    explorer = Explorer(ExplorerData(model, device, dtype, cache_dir, **sizes))
    display(explorer.widget)
    return explorer
