"""A real-browser harness: JupyterLab on 127.0.0.1 and Debian's headless Chromium driven by playwright.

    with jupyter_lab(root) as lab, chromium_page() as page:
        page.goto(lab.url("paper_figures/notebooks/04_ncs.ipynb"))

The server runs without a token on a free port, as root if need be (`--allow-root`, the way `make lab`
starts it), with its settings, workspaces and runtime files in a temporary folder, and is stopped by its
PID. The browser is the system's (`/usr/bin/chromium`, installed by `.ci/run`), never a downloaded build.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent  # the checkout whose helpers the kernels import
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
START_TIMEOUT_S = 90


def browser_missing() -> str | None:
    """Why no browser test can run here, or None when Chromium and playwright are both present."""
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM}: install Debian's package (apt-get install chromium), as .ci/run does"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (it is in requirements.txt: run make setup)"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Lab:
    port: int
    process: subprocess.Popen

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/lab/tree/{path}"


@contextmanager
def jupyter_lab(root: Path):
    """JupyterLab serving `root`; notebooks render every cell (windowing off) so that a page shows all outputs."""
    port = _free_port()
    home = Path(tempfile.mkdtemp(prefix="lab-"))
    settings = home / "settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    news = home / "settings" / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True)
    (news / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    env = dict(
        os.environ,
        JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(home / "ws"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        JUPYTER_CONFIG_DIR=str(home / "config"),
        # kernels start in their notebook's folder: put this checkout first so they import its helpers
        # (not those of another checkout that the editable install points to)
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
    )
    command = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        "--allow-root",
        f"--port={port}",
        "--ip=127.0.0.1",
        "--ServerApp.token=",
        "--ServerApp.password=",
        f"--ServerApp.root_dir={root}",
        "--LabApp.news_url=",
        "--LabServerApp.extra_labextensions_path=[]",
    ]
    log = (home / "server.log").open("w")
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_until_up(port, process, home / "server.log")
        yield Lab(port, process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
        shutil.rmtree(home, ignore_errors=True)


def _wait_until_up(port: int, process: subprocess.Popen, log: Path) -> None:
    deadline = time.time() + START_TIMEOUT_S
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=2)
            return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"JupyterLab did not answer within {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


@contextmanager
def chromium_page(width: int = 1400, height: int = 1000):
    """A page of Debian's headless Chromium."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(60_000)
            yield page
        finally:
            browser.close()


def open_notebook(page, lab: Lab, path: str) -> None:
    """Open a notebook and wait until its cells and outputs have rendered."""
    page.goto(lab.url(path))
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", state="attached")
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(1500)  # late outputs (images decode after the cells attach)


def wait_for_kernel_idle(page, timeout_ms: int = 120_000) -> None:
    """Wait until the open notebook's kernel is started and idle. The status bar reads "<kernel> | Idle"
    (the toolbar's execution indicator says "idle" already while no kernel is connected)."""
    page.wait_for_function(
        """() => {
            const bar = document.querySelector('#jp-main-statusbar');
            return bar && bar.innerText.includes('| Idle') && !bar.innerText.includes('No Kernel');
        }""",
        timeout=timeout_ms,
    )


def screenshot_first_figure(page, path: Path) -> None:
    """A screenshot of the open notebook scrolled to its first figure (the notebook scrolls inside the page)."""
    image = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-RenderedImage img").first
    if image.count():
        image.scroll_into_view_if_needed()
        page.wait_for_timeout(300)
    page.screenshot(path=str(path))


def notebook_state(page) -> dict:
    """What the open notebook shows: rendered images, error outputs, widget errors."""
    return page.evaluate(
        """() => {
            const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
            const images = [...panel.querySelectorAll('.jp-RenderedImage img')];
            const errors = [...panel.querySelectorAll('.jp-OutputArea-output')].filter(
                o => o.innerText.includes('Traceback (most recent call last)'));
            return {
                images: images.length,
                loaded: images.filter(i => i.complete && i.naturalWidth > 0).length,
                errors: errors.map(o => o.innerText.slice(0, 300)),
                widget_errors: panel.innerText.includes('Error displaying widget'),
                cells: panel.querySelectorAll('.jp-Cell').length,
            };
        }"""
    )
