"""`pip install .` (not editable) gives a package that works outside the checkout: the wheel ships the toys, the
notebooks and the paper's reference tables, and README's quick start runs from it with the cache in the folder it
runs in, the code hash reading the installed modules."""

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from helpers.storage import paths
from helpers.storage.code_hash import code_version
from tests.test_quickstart import _quick_start

pytestmark = pytest.mark.slow

# After the quick start: where the package, its notebooks and the result cache are, and one cached computation
CHECK = """
import helpers
from helpers.storage import code_hash, paths
print("PACKAGE", helpers.__file__)
print("NOTEBOOKS", len(list(paths.NOTEBOOKS.glob("[0-9][0-9]_*.py"))))
print("REFERENCE", len(list(paths.REFERENCE.glob("*.csv"))))
print("CACHE", paths.CACHE)
print("CODE", code_hash.code_version("helpers.measures.necessity"))
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out)]
    subprocess.run([*build, str(paths.ROOT)], check=True)
    return next(out.glob("*.whl"))


def test_the_wheel_ships_every_toy_the_notebooks_and_the_reference_tables(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    toys = [p.name for p in paths.TOY_MODELS.iterdir() if (p / "config.json").is_file()]
    assert toys and all(f"helpers/toy/models/{toy}/model.safetensors" in names for toy in toys), toys
    assert "helpers/toy/model/model.safetensors" in names and "helpers/storage/headset.schema.json" in names
    shipped = [name.split("/share/visual-heads-companion/", 1)[1] for name in names if "/share/" in name]
    assert {f"notebooks/{p.name}" for p in paths.NOTEBOOKS.glob("[0-9][0-9]_*.py")} <= set(shipped)
    assert {f"reference/{p.name}" for p in paths.REFERENCE.glob("*.csv")} <= set(shipped)


def test_the_quick_start_runs_from_the_installed_wheel(wheel, tmp_path):
    """A fresh venv holding the wheel alone; the dependencies come from this environment's site-packages, named
    in a .pth file (whose own .pth files, this checkout's editable install among them, are not read)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())  # fmt: skip
    (site / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index"]
    subprocess.run([*pip, str(wheel)], check=True)
    home = tmp_path / "home"
    home.mkdir()
    script = _quick_start() + CHECK
    done = subprocess.run([python, "-c", script], cwd=home, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if line.split(" ", 1)[0].isupper())
    assert Path(lines["PACKAGE"]).is_relative_to(site)
    assert int(lines["NOTEBOOKS"]) == len(list(paths.NOTEBOOKS.glob("[0-9][0-9]_*.py")))
    assert int(lines["REFERENCE"]) == len(list(paths.REFERENCE.glob("*.csv")))
    assert Path(lines["CACHE"]).is_relative_to(home.resolve())
    assert lines["CODE"] == code_version("helpers.measures.necessity")  # the same code, the same cache keys
