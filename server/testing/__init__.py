"""Real servers for tests and benchmarks: local Redis processes on free loopback ports."""
