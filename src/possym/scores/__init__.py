"""Positional and symbolic scores of attention heads (paper A App. D, paper B): the metric, an exact
fast engine, the swap-and-rerun reference, learning dynamics, frequency use and a training monitor."""
