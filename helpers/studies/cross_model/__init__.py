"""Notebook 06: everything it runs per model, the resolution of its numbers, the pointing suite and its tables."""
