"""The query-row groups an intervention can act at (the paper's query source), by name, and the check that a caller
names one as `row_group=` (the old keyword `rows=` is refused, naming the new one)."""

import functools

# "all" rows, the "image" token rows, the "prompt" text rows (question and options) or the "last" prompt row
ROW_GROUPS = ("all", "image", "prompt", "last")


def takes_row_group(function):
    """`function`, which takes a row group as `row_group`, refusing a call that passes it as the old `rows=`."""

    @functools.wraps(function)
    def checked(*args, **kwargs):
        if "rows" in kwargs:
            raise TypeError(
                f"{function.__qualname__}: rows= is now row_group= (a row group, one of {ROW_GROUPS}); "
                f"got rows={kwargs['rows']!r}"
            )
        return function(*args, **kwargs)

    return checked
