"""Where a run's copy ledger plugs into the engine: run_head_sets and probe count their copies through the counter
a run installed here, or the copy ledger's own while a ledger is open (helpers.engine.copy_ledger.active_counter);
with neither they compute and do nothing else.

The runner installs helpers.engine.copy_ledger's counter in every notebook's kernel (helpers.runner.params.gather).
A counter has ``counted(loaded, item, spec, start, logits_to_keep, per_forward)``, a context manager around
run_head_sets' forwards, and ``probe_copies(loaded, read, intervene)``: None, or an object whose ``step(tokens,
start, end)`` sees each forward step of a probe call and whose ``close()`` ends it.
"""

DECIDES_RESULTS = False  # counts what is computed, never changes it (helpers.storage.code_hash)
_INSTALLED: list = []  # the one installed counter, or none


def install(counter) -> None:
    """Make `counter` the one the engine calls (replacing any installed before)."""
    _INSTALLED[:] = [counter]


def uninstall() -> None:
    _INSTALLED.clear()


def installed():
    """The installed counter, or None."""
    return _INSTALLED[0] if _INSTALLED else None
