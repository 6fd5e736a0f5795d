"""The paper's stimuli: corpora of tiles, the item builders, the 2 x 3 x 2 design, the pointing suite."""
