"""How a number prints in a sentence, a verdict's reason or a claim's detail: at a fixed number of decimals, with
a value that rounds to zero there printed as "0.000", never "-0.000" (the tables do the same for their cells:
helpers.figures.writers.unsigned_zeros).

    printed(-0.0001)      # "0.000"
    printed(-0.0123, 2)   # "-0.01"

TABLE_DIGITS is the one precision of the tables (helpers.figures.writers.save_table); a verdict judges the numbers
it compares with a threshold as printed there (`as_printed`), so a table, its colour and its sentence agree with
what a reader sees: an effect of 0.00997 prints as 0.010 and counts as reaching 0.01.
"""

TABLE_DIGITS = 3  # the decimals every table prints


def as_printed(value: float, digits: int = TABLE_DIGITS) -> float:
    """`value` as it reads printed with `digits` decimals (0.00997 -> 0.01, 0.00949 -> 0.009)."""
    return float(f"{float(value):.{digits}f}")


def printed(value: float, digits: int = TABLE_DIGITS) -> str:
    """`value` with `digits` decimals; unsigned where it rounds to zero at that precision."""
    text = f"{float(value):.{digits}f}"
    return text.removeprefix("-") if float(text) == 0 else text
