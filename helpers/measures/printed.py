"""How a number prints in a sentence, a verdict's reason or a claim's detail: at a fixed number of decimals, with
a value that rounds to zero there printed as "0.000", never "-0.000" (the tables do the same for their cells:
helpers.figures.writers.unsigned_zeros).

    printed(-0.0001)      # "0.000"
    printed(-0.0123, 2)   # "-0.01"
"""


def printed(value: float, digits: int = 3) -> str:
    """`value` with `digits` decimals; unsigned where it rounds to zero at that precision."""
    text = f"{float(value):.{digits}f}"
    return text.removeprefix("-") if float(text) == 0 else text
