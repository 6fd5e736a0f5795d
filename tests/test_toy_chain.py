"""The default toy's chain of runs (helpers/toy/chain.py, `make toy-model`): the recipe the code runs is the one the
default's card records, stage by stage, and each stage shipped in helpers/toy/models/ was trained by that recipe."""

import json

import pytest

from helpers.storage.paths import TOY_MODEL, TOY_MODELS
from helpers.toy.build import DEPTH_DEFAULTS
from helpers.toy.chain import DEFAULT_CHAIN, RECIPE_KEYS, Stage
from helpers.toy.train import DEFAULT_DROPHEAD, DEFAULT_MERGE, DEFAULT_MINUTES, Recipe, argument_parser

DEFAULT = json.loads((TOY_MODEL / "heldout_accuracy.json").read_text())


def _trained_recipe(summary: dict) -> dict:
    """The recipe a run's heldout_accuracy.json records (runs before the depth recipe: its defaults)."""
    return {key: (DEPTH_DEFAULTS | summary)[key] for key in RECIPE_KEYS}


def test_the_chain_is_the_recipe_the_card_records():
    recorded = DEFAULT["chain"]
    assert [s["name"] for s in recorded] == [s.name for s in DEFAULT_CHAIN]
    assert [s["init_from"] for s in recorded] == [s.init_from for s in DEFAULT_CHAIN]
    assert [s["recipe"] for s in recorded] == [s.recipe() for s in DEFAULT_CHAIN]
    assert "make toy-model" in (TOY_MODEL / "README.md").read_text()


def test_each_stage_starts_from_the_one_before():
    assert DEFAULT_CHAIN[0].init_from is None
    for before, stage in zip(DEFAULT_CHAIN, DEFAULT_CHAIN[1:]):
        assert stage.init_from == f"toy-{before.name}"


@pytest.mark.parametrize("stage", DEFAULT_CHAIN, ids=lambda s: s.name)
def test_shipped_stages_were_trained_by_the_chains_recipe(stage: Stage):
    folder = TOY_MODEL if stage is DEFAULT_CHAIN[-1] else TOY_MODELS / stage.name
    if not folder.is_dir():
        pytest.skip(f"{stage.name} is kept in history only")
    summary = json.loads((folder / "heldout_accuracy.json").read_text())
    assert _trained_recipe(summary) == stage.recipe()
    origin = summary.get("initialised_from")
    assert (origin is None) == (stage.init_from is None)


def test_the_first_stage_is_train_pys_defaults():
    first = DEFAULT_CHAIN[0]
    assert (first.merge_size, first.drophead, first.max_minutes) == (DEFAULT_MERGE, DEFAULT_DROPHEAD, DEFAULT_MINUTES)
    assert {k: first.recipe()[k] for k in DEPTH_DEFAULTS} == DEPTH_DEFAULTS


def test_a_stage_command_names_every_recipe_flag():
    command = DEFAULT_CHAIN[-1].command()
    assert "--option-smoothing=0.02" in command and "--init-from=toy-depth-nowords-nodh" in command
    assert "--name=depth-nodh-p98" in command
    assert len([arg for arg in command if arg.startswith("--")]) == len(RECIPE_KEYS) + 2


@pytest.mark.parametrize("stage", DEFAULT_CHAIN, ids=lambda s: s.name)
def test_a_stage_command_parses_into_the_recipe_it_records(stage: Stage):
    recipe = Recipe(**vars(argument_parser().parse_args(stage.command())))
    assert {key: getattr(recipe, key) for key in RECIPE_KEYS} == stage.recipe()
    assert (recipe.name, recipe.init_from) == (stage.name, stage.init_from)
