"""Private modules of :mod:`advisor.knowledge`; import the public names from there."""
