# EventLog as an extension type when the core is compiled (see blackdrez.server.table.parts):
# every attribute its __init__ sets, in its order.

cdef class EventLog:
    cdef object __weakref__
    cdef public object seq, kept
    cdef public list pending
    cdef public object info_dirty, game_start
