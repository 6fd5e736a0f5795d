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


def explorer_notebook(folder) -> str:
    """A one-cell notebook that shows the explorer on the toy; its path relative to the repository root."""
    import nbformat

    folder.mkdir(parents=True, exist_ok=True)
    cell = nbformat.v4.new_code_cell(
        "from helpers.explorer import show_explorer\n\nexplorer = show_explorer(model='toy')"
    )
    notebook = nbformat.v4.new_notebook(cells=[cell])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, folder / "explorer.ipynb")
    return (folder / "explorer.ipynb").relative_to(paths.ROOT).as_posix()


def score_map_source(page, index: int = 0) -> str:
    """The src of the explorer's image `index` (0: the score map, 1: the overlap map): a new blob URL
    whenever it is redrawn."""
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) img.widget-image").nth(index).get_attribute("src")


def check_explorer(page, lab_url: str, notebook: str, screenshot) -> dict:
    """Run the explorer notebook in JupyterLab, change the setting and k, and check that the score map is
    redrawn each time and no widget fails to display. `lab_url(path)` gives a notebook's URL."""
    page.goto(lab_url(notebook))
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", state="attached")
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=120_000)
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell .cm-content").first.click()
    page.keyboard.press("Shift+Enter")
    page.wait_for_selector("img.widget-image[src^='blob:']", timeout=300_000)
    first = score_map_source(page)
    panel = ".jp-NotebookPanel:not(.lm-mod-hidden)"
    page.locator(f"{panel} .widget-dropdown:has(label:text-is('setting')) select").select_option("co-ref-qsp")
    page.wait_for_function(f"() => document.querySelector('{panel} img.widget-image').src !== '{first}'")
    second, overlap = score_map_source(page), score_map_source(page, 1)
    readout = page.locator(f"{panel} .widget-hslider:has(label:text-is('k')) .widget-readout")
    readout.click()
    page.keyboard.press("Control+A")
    page.keyboard.type("5")
    page.keyboard.press("Enter")
    page.wait_for_function(f"() => document.querySelector('{panel} img.widget-image').src !== '{second}'")
    page.wait_for_function(f"() => document.querySelectorAll('{panel} img.widget-image')[1].src !== '{overlap}'")
    page.wait_for_timeout(1000)
    page.screenshot(path=str(screenshot))
    text = page.locator(panel).inner_text()
    return {"sources": [first, second, score_map_source(page)], "widget_errors": "Error displaying widget" in text}


def test_explorer_redraws_the_score_map_in_jupyterlab():
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    notebook = explorer_notebook(SCREENSHOTS / "explorer")
    with jupyter_lab(paths.ROOT) as lab, chromium_page() as page:
        state = check_explorer(page, lab.url, notebook, SCREENSHOTS / "explorer.png")
    assert len(set(state["sources"])) == 3, state  # redrawn after the setting and after k changed
    assert not state["widget_errors"], state
    assert (SCREENSHOTS / "explorer.png").stat().st_size > 10_000
