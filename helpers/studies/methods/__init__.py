"""Notebook 08: the published discovery methods compared on the same strips, their sets put to the paper's tests."""
