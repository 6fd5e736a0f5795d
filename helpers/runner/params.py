"""The notebooks' parameters: read from the `parameters` cell, validated in one place for every notebook.

A notebook calls `gather(globals(), "03_cers")`: the names its parameters cell declares are collected
(nothing is typed twice), each is checked, the smoke sizes are applied when `smoke` is true, and the
run's folders are resolved (helpers/storage/runs.py). A bad value stops with a message naming it and what is
allowed.
"""

import ast
import json
import re
import tempfile
from pathlib import Path
from types import SimpleNamespace

from helpers import sizes
from helpers.engine.devices import DTYPE_NAMES, resolve_device, resolve_dtype
from helpers.engine.model_files import missing_chat_template, missing_files, model_folder
from helpers.engine.row_groups import ROW_GROUPS
from helpers.measures import names
from helpers.sizes import CARD_SIZES
from helpers.stimuli.corpora import ImageFolderCorpus
from helpers.stimuli.design import CORPORA, SETTINGS
from helpers.storage import paths, runs

DEVICE_CHOICES = ("cpu", "cuda", "mps", "auto")
DTYPE_CHOICES = (*DTYPE_NAMES, "auto")
GRID_CLASSES = 4  # a 2x2 grid item shows four different classes of the evaluation corpus
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
SIZE_MINIMUM = {
    "strips_per_forward": 1,
    "sets_per_forward": 1,
    "n_items": 2,
    "n_eval": 2,
    "n_strips": 2,
    "n_random": 2,
    "n_random_large": 2,
    "n_splits": 1,
    "n_boot": 10,
    "n_pointing": 2,
    "n_random_grid": 2,
}


class ParameterError(ValueError):
    """A notebook parameter with a value that is not allowed."""


RENAMED = {"rows": "row_group"}  # a parameter's old name -> its name


def check_renamed(given) -> None:
    """Refuse the parameters of `given` (names) passed under an old name (RENAMED), naming the new one."""
    old = sorted(set(given) & set(RENAMED))
    if old:
        raise ParameterError(
            "; ".join(f"{name}= is now {RENAMED[name]}=: pass -p {RENAMED[name]} <value>" for name in old)
        )


def _fail(name, value, allowed):
    raise ParameterError(f"parameter {name}={value!r} is not allowed; {allowed}")


def _check_model(value, name="model"):
    allowed = "use 'toy' (or 'toy-qwen2vl', 'toy-llava'), a local save_pretrained folder or a hub id like "
    if not isinstance(value, str) or not value:
        _fail(name, value, allowed + "'Qwen/Qwen3-VL-8B-Instruct'")
    toy = paths.toy_folder(value)
    if not ((toy is not None and toy.is_dir()) or Path(value).expanduser().is_dir() or HUB_ID.match(value)):
        toys = ", ".join(["toy", *sorted(f"toy-{p.name}" for p in paths.TOY_MODELS.glob("*") if p.is_dir())])
        _fail(
            name,
            value,
            f"it is neither an embedded toy ({toys}), an existing folder, nor a hub id of the form 'org/name'",
        )
    folder = Path(value).expanduser()
    local = toy if toy is not None else folder if folder.is_dir() else None  # not a hub snapshot: it may be partial
    missing = missing_files(folder) if toy is None and local is not None else ""
    if not missing and local is not None and (local / "config.json").is_file():  # a toy not built: model_folder
        missing = missing_chat_template(local)
    if missing:
        _fail(name, value, f"the folder {local} holds {missing}; pass a save_pretrained folder")
    try:
        model_folder(str(folder) if toy is None and folder.is_dir() else value)
    except FileNotFoundError as error:  # a toy not built, or a hub id not cached while offline
        _fail(name, value, str(error))
    return value


def _check_benchmarks(value):
    from helpers.stimuli.pointing_convert import RECIPES  # the converters' recipes (a light module)

    if isinstance(value, dict) and all(
        isinstance(k, str) and k.lower() in RECIPES and Path(str(v)).expanduser().exists() for k, v in value.items()
    ):
        return {k: Path(str(v)).expanduser().resolve() for k, v in value.items()}
    _fail(
        "benchmarks",
        value,
        f"use {{benchmark: existing .jsonl file or folder}} with benchmarks from {sorted(RECIPES)}",
    )


def _check_models(value):
    if isinstance(value, (list, tuple)) and value and len(set(value)) == len(value):
        return [_check_model(v, "models") for v in value]
    _fail("models", value, "use a non-empty list of distinct model names (toy names, folders or hub ids)")


def _check_device(value):
    if not (isinstance(value, str) and (value in DEVICE_CHOICES or re.fullmatch(r"cuda:\d+", value))):
        _fail("device", value, f"allowed: {', '.join(DEVICE_CHOICES)} or 'cuda:N'")
    try:
        return resolve_device(value)  # "auto" -> the device this machine has
    except ValueError as error:
        _fail("device", value, str(error))


def _check_dtype(value):
    if value in DTYPE_CHOICES:
        return value
    _fail("dtype", value, f"allowed: {', '.join(DTYPE_CHOICES)}")


def _check_settings(value):
    names = list(SETTINGS) if value == "all" else value
    if isinstance(names, str):
        names = [names]
    bad = [n for n in names if n not in SETTINGS] if isinstance(names, (list, tuple)) else [names]
    if bad or not names:
        _fail("settings", value, f"allowed: 'all' or a list of {', '.join(SETTINGS)}")
    return list(names)


def _check_k(name, optional=False):
    def check(value):
        if optional and value is None:
            return None
        if _is_k(value):
            return value
        _fail(name, value, "use an int >= 1 (heads) or a float share 0 < k < 1")

    return check


def _is_k(value) -> bool:
    return not isinstance(value, bool) and (
        (isinstance(value, int) and value >= 1) or (isinstance(value, float) and 0 < value < 1)
    )


def _check_ks(value):
    if isinstance(value, (list, tuple)) and value and all(map(_is_k, value)):
        return list(value)
    _fail("ks", value, "use a non-empty list of head-set sizes, each an int >= 1 (heads) or a float share 0 < k < 1")


def _check_size(name):
    def check(value):
        low = SIZE_MINIMUM[name]
        if isinstance(value, int) and not isinstance(value, bool) and value >= low:
            return value
        _fail(name, value, f"use an int >= {low}")

    return check


def _check_seed(value):
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    _fail("seed", value, "use an int >= 0")


def _check_flag(name):
    def check(value):
        if isinstance(value, bool):
            return value
        _fail(name, value, "use True or False")

    return check


def _check_dir(name):
    def check(value):
        if value is None:
            return None
        if not (isinstance(value, (str, Path)) and str(value)):
            _fail(name, value, "use a folder path, or None for the run's own folder")
        folder = Path(value).expanduser().resolve()
        if folder.exists() and not folder.is_dir():
            _fail(name, value, f"{folder} is an existing file, not a folder; use a folder path")
        existing = next(p for p in (folder, *folder.parents) if p.exists())  # what will hold the new folders
        if not _writable(existing):
            _fail(name, value, f"{existing} is not writable by this user; use a folder you can write to")
        return folder

    return check


def _writable(folder: Path) -> bool:
    """A file can be created in `folder` and removed again (os.access says yes to root everywhere)."""
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-check-"):
            return True
    except OSError:
        return False


def _check_choice(name, allowed):
    def check(value):
        if value in allowed:
            return value
        _fail(name, value, f"allowed: {', '.join(map(repr, allowed))}")

    return check


def _is_positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < float("inf")


def _check_beta(value):
    if _is_positive(value):
        return float(value)
    _fail("beta", value, "use a finite number > 0")


def _check_betas(value):
    if isinstance(value, (list, tuple)) and value and all(map(_is_positive, value)):
        return sorted(float(v) for v in value)
    _fail("betas", value, "use a non-empty list of finite numbers > 0, e.g. [1, 3, 10, 100]")


def _check_heads(value):
    entries = [value] if isinstance(value, str) else value
    if isinstance(entries, (list, tuple)) and all(isinstance(e, str) and e for e in entries):
        for entry in entries:
            _check_json_file(entry)
        return list(entries)
    _fail("heads", value, "use a list of head-set files or discovery setting names, e.g. ['co-ref-qsp']")


def _check_json_file(entry: str) -> None:
    """A JSON head-set file that does not parse, or a head-set record against the schema, refused before the model's
    config is read (no torch); its layers x heads are checked against the model's later (_check_head_files)."""
    path = Path(entry).expanduser()
    if entry in SETTINGS or not path.is_file() or path.suffix in (".npy", ".csv"):
        return
    try:
        record = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        _fail("heads", entry, f"{path}: not valid JSON ({error}); fix: write the file as JSON")
    if isinstance(record, dict) and "heads" in record:
        from helpers.storage import headsets

        try:
            headsets.validate_record(record, path)
        except ValueError as error:
            _fail("heads", entry, str(error))


def _check_method(value):
    if value is None or value in names.METHOD_NAMES:
        return value
    _fail("method", value, f"use None or a published method: {', '.join(names.METHOD_NAMES)}")


def _check_import_k(value):
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return value
    _fail("import_k", value, "use None or an int >= 1: the heads to take from an imported score file")


def _check_controls(value):
    if value is None or value in names.CONTROL_SCHEMES:
        return value
    _fail("controls", value, f"use None or a control scheme: {', '.join(names.CONTROL_SCHEMES)}")


def _check_sizes(value):
    known = CARD_SIZES["default"]
    if not isinstance(value, dict) or not set(value) <= set(known):
        _fail("sizes", value, f"use a dict of profile sizes to override, with keys among {sorted(known)}")
    checked = {}
    for name, size in value.items():
        if name == "betas":
            checked[name] = _check_betas(size)
        elif not (isinstance(size, int) and not isinstance(size, bool) and size >= 1):
            _fail("sizes", value, f"sizes[{name!r}] = {size!r}: use an int >= 1")
        else:
            checked[name] = size
    return checked


def _check_corpus(name):
    def check(value):
        if value in CORPORA:
            return value
        source = Path(value).expanduser() if isinstance(value, str) and value else None
        if source is None or not (source.is_dir() or (source.is_file() and source.suffix.lower() == ".csv")):
            _fail(
                name,
                value,
                f"allowed: {', '.join(map(repr, CORPORA))}, an image folder (class sub-folders) or a CSV of "
                "path,label rows",
            )
        try:
            corpus = ImageFolderCorpus(source)
            corpus.check_readable()
        except ValueError as error:
            _fail(name, value, str(error))
        if len(corpus.labels) < GRID_CLASSES:
            _fail(
                name,
                value,
                f"it holds {len(corpus.labels)} class(es) ({', '.join(map(repr, corpus.labels))}); the 2x2 grid "
                f"items need at least {GRID_CLASSES} classes",
            )
        return value

    return check


CHECKS = {
    "model": _check_model,
    "models": _check_models,
    "benchmarks": _check_benchmarks,
    "device": _check_device,
    "dtype": _check_dtype,
    "settings": _check_settings,
    "k": _check_k("k", optional=True),  # None: the paper's share (design.PAPER_K_SHARE)
    "k_crossover": _check_k("k_crossover", optional=True),
    "ks": _check_ks,
    "key_agg": _check_choice("key_agg", ("raw", "share")),
    "row_agg": _check_choice("row_agg", ("mean", "max")),
    "beta": _check_beta,
    "betas": _check_betas,
    "row_group": _check_choice("row_group", ROW_GROUPS),
    "eval_corpus": _check_corpus("eval_corpus"),
    "seed": _check_seed,
    "profile": _check_choice("profile", sizes.PROFILE_NAMES),
    "smoke": _check_flag("smoke"),
    "interactive": _check_flag("interactive"),
    "torch_compile": _check_flag("torch_compile"),
    "heads_from_other_model": _check_flag("heads_from_other_model"),
    "heads": _check_heads,
    "import_k": _check_import_k,
    "controls": _check_controls,
    "method": _check_method,
    "sizes": _check_sizes,
    "out_dir": _check_dir("out_dir"),
    "data_dir": _check_dir("data_dir"),
    "cache_dir": _check_dir("cache_dir"),
    **{name: _check_size(name) for name in SIZE_MINIMUM},
}


def validate(params: dict, notebook: str | None = None) -> SimpleNamespace:
    """Check every parameter, take the sizes of the "paper" profile where it is chosen, then shrink
    sizes to sizes.SMOKE_SIZES when `smoke` is true (smoke wins over the profile); return them as attributes. With the
    `notebook`, the model is also checked against what that notebook needs (helpers.runner.steps: region analyses)."""
    check_renamed(params)
    unknown = sorted(set(params) - set(CHECKS))
    if unknown:
        raise ParameterError(f"unknown parameter(s) {unknown}; known: {', '.join(sorted(CHECKS))}")
    checked = {name: CHECKS[name](value) for name, value in params.items()}
    if checked.get("heads") == [] and checked.get("method") is None:
        _fail("heads", [], "give at least one head-set file or setting name, or a `method` to discover one")
    if checked.get("profile") == "paper":
        checked.update({n: v for n, v in sizes.PAPER_SIZES.items() if n in checked})
    if "dtype" in checked:  # "auto" -> bfloat16 on cuda, float32 elsewhere
        checked["dtype"] = resolve_dtype(checked["dtype"], checked.get("device", "cpu"))
    _check_against_model(checked, notebook)
    if checked.get("smoke"):
        checked.update({n: min(v, sizes.SMOKE_SIZES[n]) for n, v in checked.items() if n in sizes.SMOKE_SIZES})
    return SimpleNamespace(**checked)


def model_adapter(model: str):
    """The engine's adapter of `model` from its config alone (no weights), or None for a hub id still to be
    downloaded; an unsupported family is refused, naming the model. Imports torch and transformers."""
    from helpers.engine.adapters import adapter_from_files

    try:
        return adapter_from_files(model)
    except ValueError as error:
        _fail("model", model, str(error))


def _check_against_model(checked: dict, notebook: str | None) -> None:
    """The model's family has an adapter; head counts k, k_crossover and ks fit its heads; a notebook whose
    analyses key on regions gets a family that maps them. All from config.json, before the model loads."""
    from helpers.runner.steps import STEPS

    model = checked.get("model", "toy")
    adapter = model_adapter(model)
    if adapter is None:  # a hub id still to be downloaded: checked when it loads
        return
    step = STEPS.get(notebook or "")
    if step is not None and step.needs_regions and not adapter.maps_regions:
        _fail("model", model, f"notebook {notebook} needs region analyses. {adapter.no_region_mapping}")
    layers, heads = len(adapter.candidate_layers), adapter.n_heads
    _check_head_files(checked, model, layers, heads)
    sizes = {name: checked[name] for name in ("k", "k_crossover") if checked.get(name) is not None}
    sizes.update({f"ks[{i}]": k for i, k in enumerate(checked.get("ks") or [])})
    total = layers * heads
    for name, k in sizes.items():
        if isinstance(k, int) and k > total:
            _fail(
                name,
                k,
                f"model {model!r} has {total} heads ({layers} layers x {heads}); "
                f"use an int from 1 to {total} or a float share 0 < k < 1",
            )


def declared_parameters(notebook: str) -> dict:
    """Name -> default value of the parameters cell of notebooks/<notebook>.py (plain literals only)."""
    source = paths.NOTEBOOKS / f"{notebook}.py"
    if not source.exists():
        raise ParameterError(f"no notebook {source.name} in {paths.NOTEBOOKS}")
    return declared_in(source)


def _check_head_files(checked: dict, model: str, layers: int, heads: int) -> None:
    """Every head-set file in `heads` (setting names are 01_discovery's files, checked when read) reads as a
    head-set of this model's layers x heads: schema, ranges, import_k (imported_head_sets.read_any); a file
    discovered on another model is refused unless `heads_from_other_model` accepts it."""
    from helpers.measures.imported_head_sets import read_any
    from helpers.storage import headsets

    for entry in checked.get("heads") or []:
        if entry in SETTINGS:
            continue
        path = Path(entry).expanduser()
        if not path.is_file():
            _fail("heads", entry, f"{path} is not a file; give head-set files (json, npy, csv) or setting names")
        try:
            record = read_any(path, model, layers, heads, checked.get("import_k"))
        except ValueError as error:
            _fail("heads", entry, str(error))
        if not headsets.same_model(record["model"], model) and not checked.get("heads_from_other_model"):
            _fail(
                "heads",
                entry,
                f"{path} was discovered on model {record['model']!r}, not on {model!r}; to card another model's "
                "head-set on purpose pass --heads-from-other-model (-p heads_from_other_model True)",
            )


PARAMETERS_CELL = '# %% tags=["parameters"]'


def declared_in(source: Path) -> dict:
    """The assignments of the jupytext percent cell tagged "parameters" (read as text: no jupytext import)."""
    lines = Path(source).read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == PARAMETERS_CELL]
    if len(starts) != 1:
        raise ParameterError(f"{Path(source).name} has {len(starts)} cells tagged 'parameters', expected one")
    body = []
    for line in lines[starts[0] + 1 :]:
        if line.startswith("# %%"):
            break
        body.append(line)
    declared = {}
    for statement in ast.parse("\n".join(body)).body:
        declared[statement.targets[0].id] = ast.literal_eval(statement.value)
    return declared


def check_run(source: Path, given: dict) -> SimpleNamespace:
    """Validate the parameters a run would pass to the notebook `source` (its defaults, then the names of
    `given` it declares) before it starts: the runner checks every selected notebook before executing any.
    Names no check knows are left to the notebook."""
    check_renamed(given)
    declared = declared_in(Path(source))
    values = {**declared, **{name: value for name, value in given.items() if name in declared}}
    return validate({name: value for name, value in values.items() if name in CHECKS}, Path(source).stem)


def gather(namespace: dict, notebook: str) -> SimpleNamespace:
    """The parameters `notebook` declares, read from `namespace` (the notebook's globals()), validated,
    with the run's folders resolved: `out_dir` (tables, figures), `data_dir` (files passed between
    notebooks) and `cache_dir` (results). A folder left at None is the run's own (helpers/storage/runs.py).
    The notebook's engine calls are counted in the copy ledger from here on (helpers.engine.copy_hook)."""
    from helpers.engine import copy_ledger

    copy_ledger.install_counter()
    declared = declared_parameters(notebook)
    check_renamed(name for name, value in namespace.items() if isinstance(value, str) and name not in declared)
    values = {name: namespace[name] for name in declared}
    changed = {name: value for name, value in values.items() if value != declared[name]}
    checked = validate(values, notebook)
    folders = runs.folders_for(getattr(checked, "model", "toy"), changed)  # 06 takes `models`: a toy run
    checked.out_dir = checked.out_dir or folders.out
    checked.data_dir = checked.data_dir or (folders.data if values["out_dir"] is None else checked.out_dir / "data")
    checked.cache_dir = checked.cache_dir or paths.CACHE
    checked.notebook = notebook
    return checked
