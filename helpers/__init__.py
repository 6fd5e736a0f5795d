"""Thin modules the companion's notebooks import; one concern per module."""
