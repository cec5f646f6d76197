"""Private modules of :mod:`advisor.space`; import the public names from there."""
