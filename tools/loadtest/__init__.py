"""The load tool (``blackdrez loadtest``): many connections to a server, and what they cost.

``cli`` plans and runs a load and reports it; see its module header for the theory of operation.
"""
