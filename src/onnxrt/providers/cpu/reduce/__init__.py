"""Reductions, ArgMax/ArgMin, cumulative sums and products, TopK."""
