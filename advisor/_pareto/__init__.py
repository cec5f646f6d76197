"""Private modules of :mod:`advisor.pareto`; import the public names from there."""
