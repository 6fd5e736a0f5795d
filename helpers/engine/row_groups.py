"""The query-row groups an intervention can act at (the paper's query source), by name."""

# "all" rows, the "image" token rows, the "prompt" text rows (question and options) or the "last" prompt row
ROW_GROUPS = ("all", "image", "prompt", "last")
