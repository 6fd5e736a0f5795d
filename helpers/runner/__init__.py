"""What the notebooks are run with: parameters, step contracts, sizes by profile, report (show and save)."""
