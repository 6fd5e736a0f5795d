"""Where results live: paths, run folders, the result cache and its code hash, head-set files, workers."""
