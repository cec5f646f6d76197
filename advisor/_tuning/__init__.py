"""Private modules of :mod:`advisor.tuning`; import the public names from there."""
