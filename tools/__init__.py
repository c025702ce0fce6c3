"""Tools above everything: the ``blackdrez`` command line, the load tool, the protocol examples.

Tools may import any package of the project but ``tests``; nothing imports them but tests,
benchmarks and each other.
"""
