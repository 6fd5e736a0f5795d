"""Shards: two processes (and two local Ray tasks) fill the cache, and the assembling run's tables equal a
single process's byte for byte."""

import shutil

import pytest

from helpers import launch, run
from helpers.storage import paths

SMALL = [["n_items", "12"], ["n_random", "2"], ["n_boot", "50"]]  # 2 chunks per run, so the shards split them
OPTIONS = [item for pair in SMALL for item in ("-p", *pair)]

pytestmark = pytest.mark.notebooks  # every test runs notebook 04 through the runner


def _run_folder(root):
    root.mkdir()
    shutil.copytree(paths.DATA, root / "data")  # the published head-sets that 04 reads
    return root


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """Notebook 04 at small sizes in one process: its run folder."""
    root = tmp_path_factory.mktemp("one")
    out = _run_folder(root / "single")
    run.main(["04", *OPTIONS, "-p", "cache_dir", str(root / "cache"), "--out", str(out), "--workers", "1"])
    return out


def _check_same_tables(single, sharded, cache):
    tables = sorted(p.name for p in single.glob("*.csv"))
    assert tables and tables == sorted(p.name for p in sharded.glob("*.csv"))
    for name in tables:
        assert (single / name).read_bytes() == (sharded / name).read_bytes(), name
    assert not list(cache.rglob("*.claim"))
    assert len(list(paths.BUILD.glob(f"shards/{sharded.name}-*-of-2/notebooks/04_ncs.ipynb"))) == 2  # both ran 04


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_two_shards_give_the_tables_of_one_process(single, tmp_path, engine):
    if engine == "ray":
        ray = pytest.importorskip("ray")
        try:  # a local Ray on an overloaded machine may not start (its agents' port files time out)
            ray.init(include_dashboard=False)
            ray.shutdown()
        except Exception as err:
            pytest.skip(f"a local Ray does not start here: {err}")
    sharded, cache = _run_folder(tmp_path / f"sharded-{engine}"), tmp_path / "cache"
    launch.main([engine, "04", "--shards", "2", "--out", str(sharded), *OPTIONS, "-p", "cache_dir", str(cache)])
    _check_same_tables(single, sharded, cache)
