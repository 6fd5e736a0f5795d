"""Notebook 05's checks of S against random sets: its tables, the field's control schemes, the maskings compared."""
