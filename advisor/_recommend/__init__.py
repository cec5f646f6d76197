"""Private modules of :mod:`advisor.recommend`; import the public names from there."""
