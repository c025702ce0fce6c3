# Seat, Seating and Roster as extension types when the core is compiled (see
# blackdrez.server.table.parts): every attribute their __init__ sets, in its order; the loops
# over the seats typed.
cimport cython


cdef class Seat:
    cdef public object player, name, ready, connected, bot, leaving, leaving_reason, away_since


cdef class Seating:
    cdef object __weakref__
    cdef public list seats
    cdef public set spectators
    cdef public object host, host_left, humans_came, invite
    cdef public dict ratings
    cdef public object _log

    @cython.locals(seat=Seat)
    cpdef seat_of(self, player)
    @cython.locals(s=Seat)
    cpdef deserted(self)
    @cython.locals(s=Seat)
    cpdef round_seats(self)
    @cython.locals(s=Seat)
    cpdef leaving_seats(self)
    @cython.locals(s=Seat)
    cpdef infos(self, rated)
    @cython.locals(s=Seat)
    cpdef key(self)


cdef class Roster:
    cdef object __weakref__
    cdef public object spec
    cdef public dict players
