"""Executed notebooks in a real browser: JupyterLab in Debian's headless Chromium.

Every executed notebook — the smoke run's (made in this test session) and the published default run's
(paper_figures/notebooks/, once `make figures` has published them) — opens without running anything, shows
at least the figures its step declares (helpers/steps.py) as loaded images, and no cell shows an error.
Screenshots go to build/browser/.
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


def _check_in_browser(notebooks: list, tag: str) -> dict:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shown = {}
    with jupyter_lab(paths.ROOT) as lab, chromium_page() as page:
        for path in notebooks:
            open_notebook(page, lab, path.relative_to(paths.ROOT).as_posix())
            state = notebook_state(page)
            screenshot_first_figure(page, SCREENSHOTS / f"{tag}_{path.stem}.png")
            shown[path.stem] = state
            assert state["cells"] > 3, f"{path.name}: the notebook did not render ({state})"
            assert state["loaded"] >= _declared_figures(path.stem), f"{path.name}: {state}"
            assert not state["errors"] and not state["widget_errors"], f"{path.name}: {state}"
    (SCREENSHOTS / f"{tag}_figures_shown.json").write_text(json.dumps(shown, indent=1))
    return shown


def test_smoke_run_notebooks_render_their_figures_in_jupyterlab(smoke_run):
    executed = sorted((smoke_run["folder"] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert {p.stem for p in executed} == set(STEPS)
    shown = _check_in_browser(executed, "smoke")
    assert sum(s["loaded"] for s in shown.values()) >= sum(step.n_figures for step in STEPS.values())


@pytest.mark.skipif(not PUBLISHED, reason="paper_figures/notebooks/ is not published yet: `make figures` writes it")
def test_published_notebooks_render_their_figures_in_jupyterlab():
    assert {p.stem for p in PUBLISHED} == set(STEPS), "run `make figures` to publish every executed notebook"
    for path in PUBLISHED:
        cells = json.loads(path.read_text())["cells"]
        outputs = [o for c in cells for o in c.get("outputs", [])]
        assert not [o for o in outputs if o.get("output_type") == "error"], f"{path.name} holds an error output"
    _check_in_browser(PUBLISHED, "published")
