"""Private implementation of :mod:`advisor.datasets`; import the public names from there."""
