# The Room and its Outcome as extension types when the core is compiled (``blackdrez compile
# --core``, see blackdrez.server.table.parts): every attribute their __init__ sets, in its order.
from blackdrez.server.table.history cimport EventLog
from blackdrez.server.table.seating cimport Roster, Seating
from blackdrez.server.table.timers cimport Timers


cdef class Outcome:
    cdef public list ranked, seated, unseated
    cdef public object closed
    cdef public list games_over


cdef class Room:
    cdef dict __dict__  # (the tests' harness wraps methods of a room: see parts)
    cdef object __weakref__
    cdef public object layout, arena, id, spec, options, listed, deal, daily, ranked, assist
    cdef public EventLog log
    cdef public Seating seating
    cdef public list seats
    cdef public set spectators
    cdef public object invite
    cdef public Roster roster
    cdef public object chat
    cdef public Timers timers
    cdef public object status, engine, outcome, version, applied, _acted
    cdef public set newcomers
    cdef public object games_begun, par_wanted, game_started_at, game_ended_at
    cdef public list actions
