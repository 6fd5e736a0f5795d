"""How many forward passes the paper's protocol takes (imports nothing heavy: the GPU bench uses it too)."""


def paper_forwards(n_random: int) -> dict:
    """Forward passes (item x head-set) of the paper's protocol, and how many batched calls they need."""
    settings, items, sets = 12, 400, n_random + 1
    counts = {
        "discovery (12 settings x N=400, one read each)": (settings * items, settings * items),
        "CERS (S+R sets x 2 steer targets)": (settings * items * sets * 2, settings * items * 2),
        "NCS (S+R x matched/mismatched + 2 baselines)": (settings * items * (sets * 2 + 2), settings * items * 4),
        "beta sweep (5 betas x 4 settings x N=200, S+5)": (5 * 4 * 200 * 6 * 2, 5 * 4 * 200 * 2),
        "controls (generic damage, 8 sets, 4 row groups)": (12 * items * 8 * 4 * 2, 12 * items * 4 * 2),
    }
    return {name: {"forwards": f, "batched_calls": c} for name, (f, c) in counts.items()}
