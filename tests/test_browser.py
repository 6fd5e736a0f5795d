"""Executed notebooks in a real browser: JupyterLab in Debian's headless Chromium.

Every executed notebook — the smoke run's (made in this test session) and the published default run's
(paper_figures/notebooks/, once `make figures` has published them) — opens without running anything, shows
at least the figures its step declares (helpers/runner/steps.py) as loaded images, and no cell shows an error.
Screenshots go to build/browser/.

The head-set explorer (helpers/studies/explorer.py) runs live: a one-cell notebook shows it on the toy, and
changing its setting and k redraws the score map and overlap images.
"""

import json
import shutil
from contextlib import contextmanager

import pytest

from helpers.runner.steps import STEPS
from helpers.storage import paths
from tests.browser import (
    browser_missing,
    chromium_page,
    jupyter_lab,
    notebook_state,
    open_notebook,
    screenshot_first_figure,
    wait_for_kernel_idle,
)

SCREENSHOTS = paths.BUILD / "browser"
PUBLISHED = sorted(paths.PUBLISHED_NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))

pytestmark = [pytest.mark.browser, pytest.mark.skipif(browser_missing() is not None, reason=str(browser_missing()))]


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


@pytest.mark.notebooks
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


PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"
IMAGES = f"{PANEL} img.widget-image"  # the explorer's images: 0 the score map, 1 the overlap map, then the rest


@contextmanager
def step(name: str):
    """Say which step of a browser test failed when one of its bounded waits runs out."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        yield
    except PlaywrightTimeout as error:
        raise AssertionError(f"{name}: {str(error).splitlines()[0]}") from None


def explorer_notebook(folder) -> str:
    """A one-cell notebook that shows the explorer on the toy, in a fresh `folder` (Jupytext pairs every
    notebook the server saves with a .py, and refuses to open an .ipynb newer than a stale one); its path
    relative to the repository root."""
    import nbformat

    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    cell = nbformat.v4.new_code_cell(
        "from helpers.studies.explorer import show_explorer\n\nexplorer = show_explorer(model='toy')"
    )
    notebook = nbformat.v4.new_notebook(cells=[cell])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, folder / "explorer.ipynb")
    return (folder / "explorer.ipynb").relative_to(paths.ROOT).as_posix()


def image_sources(page) -> list:
    """The src of the score map and the overlap map: a new blob URL whenever one is redrawn."""
    return page.eval_on_selector_all(IMAGES, "images => images.slice(0, 2).map(i => i.src)")


def wait_for_redraw(page, before: list, name: str) -> list:
    """Wait until both the score map and the overlap map have a new src; return the new ones."""
    with step(f"{name}: the score map and the overlap map are redrawn"):
        page.wait_for_function(
            """([selector, before]) => {
                const now = [...document.querySelectorAll(selector)].slice(0, 2).map(i => i.src);
                return now.length === 2 && now.every((src, i) => src.startsWith('blob:') && src !== before[i]);
            }""",
            arg=[IMAGES, before],
            timeout=120_000,
        )
    return image_sources(page)


def check_explorer(page, lab, notebook: str, screenshot) -> dict:
    """Run the explorer notebook in JupyterLab, change the setting, then k; the image sources after each."""
    page.goto(lab.url(notebook))
    with step("the kernel starts"):
        wait_for_kernel_idle(page)
    with step("run the cell"):
        page.locator(f"{PANEL} .jp-Cell .cm-content").first.click()
        page.keyboard.press("Shift+Enter")
    with step("the explorer cell shows two images or an error"):  # the first view runs the toy's forward
        page.wait_for_function(
            """([selector, panel]) => document.querySelectorAll(selector + "[src^='blob:']").length >= 2
                || /Traceback|Error displaying widget/.test(document.querySelector(panel).innerText)""",
            arg=[IMAGES, PANEL],
            timeout=180_000,
        )
    state = notebook_state(page)
    assert not state["errors"] and not state["widget_errors"], f"the explorer cell failed: {state}"
    sources = [image_sources(page)]
    with step("choose setting co-ref-qsp"):
        page.locator(f"{PANEL} .widget-dropdown:has(label:text-is('setting')) select").select_option("co-ref-qsp")
    sources.append(wait_for_redraw(page, sources[-1], "setting co-ref-qsp"))
    with step("type k = 5 into the slider's readout"):
        page.locator(f"{PANEL} .widget-hslider:has(label:text-is('k')) .widget-readout").click()
        page.keyboard.press("Control+A")
        page.keyboard.type("5")
        page.keyboard.press("Enter")
    sources.append(wait_for_redraw(page, sources[-1], "k = 5"))
    page.wait_for_timeout(500)  # the new images decode
    page.locator(IMAGES).first.scroll_into_view_if_needed()
    page.screenshot(path=str(screenshot))
    return {"sources": sources, "state": notebook_state(page)}


def test_explorer_redraws_the_score_map_in_jupyterlab():
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    notebook = explorer_notebook(SCREENSHOTS / "explorer")
    with jupyter_lab(paths.ROOT) as lab, chromium_page() as page:
        shown = check_explorer(page, lab, notebook, SCREENSHOTS / "explorer.png")
    score_maps, overlaps = zip(*shown["sources"])
    assert len(set(score_maps)) == 3 and len(set(overlaps)) == 3, shown  # redrawn after the setting and after k
    assert not shown["state"]["errors"] and not shown["state"]["widget_errors"], shown
    assert (SCREENSHOTS / "explorer.png").stat().st_size > 10_000
