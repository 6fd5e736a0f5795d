"""The published executed notebooks in a real browser: JupyterLab in Debian's headless Chromium.

Every notebook of the default run opens without running anything, shows at least the figures its step
declares (helpers/steps.py) as loaded images, and no cell shows an error. Screenshots go to build/browser/.
"""

import json

import pytest

from helpers import paths
from helpers.steps import STEPS
from tests.browser import (
    browser_missing,
    chromium_page,
    jupyter_lab,
    notebook_state,
    open_notebook,
    screenshot_first_figure,
)

SCREENSHOTS = paths.BUILD / "browser"
PUBLISHED = sorted(paths.PUBLISHED_NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))

pytestmark = pytest.mark.skipif(browser_missing() is not None, reason=str(browser_missing()))


def _declared_figures(notebook: str) -> int:
    return STEPS[notebook].n_figures


def test_every_step_has_a_published_executed_notebook():
    assert {p.stem for p in PUBLISHED} == set(STEPS), "run `make figures` to publish the executed notebooks"
    for path in PUBLISHED:
        cells = json.loads(path.read_text())["cells"]
        outputs = [o for c in cells for o in c.get("outputs", [])]
        assert not [o for o in outputs if o.get("output_type") == "error"], f"{path.name} holds an error output"
        assert sum("image/png" in o.get("data", {}) for o in outputs) >= _declared_figures(path.stem)


def test_published_notebooks_render_their_figures_in_jupyterlab():
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shown = {}
    with jupyter_lab(paths.ROOT) as lab, chromium_page() as page:
        for path in PUBLISHED:
            open_notebook(page, lab, path.relative_to(paths.ROOT).as_posix())
            state = notebook_state(page)
            screenshot_first_figure(page, SCREENSHOTS / f"{path.stem}.png")
            shown[path.stem] = state
            assert state["cells"] > 3, f"{path.name}: the notebook did not render ({state})"
            assert state["loaded"] >= _declared_figures(path.stem), f"{path.name}: {state}"
            assert not state["errors"] and not state["widget_errors"], f"{path.name}: {state}"
    (SCREENSHOTS / "figures_shown.json").write_text(json.dumps(shown, indent=1))
