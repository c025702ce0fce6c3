# Seating and Roster as extension types when the core is compiled (see
# blackdrez.server.table.parts): every attribute their __init__ sets, in its order.

cdef class Seating:
    cdef object __weakref__
    cdef public list seats
    cdef public set spectators
    cdef public object host, host_left, humans_came, invite
    cdef public dict ratings
    cdef public object _log


cdef class Roster:
    cdef object __weakref__
    cdef public object spec
    cdef public dict players
