"""The notebooks' shared setups built on the measures: causal experiments, cross-model runs, claims, verdicts."""
