# Timers as an extension type when the core is compiled (see blackdrez.server.table.parts):
# every attribute its __init__ sets, in its order.

cdef class Timers:
    cdef object __weakref__
    cdef public object turn_seconds, turn_deadline
    cdef public tuple turn_seats
    cdef public dict legal_now
    cdef public object next_round_at, waiting_until, close_at, budget
