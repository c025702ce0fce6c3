# Outbox and Connection as extension types when the core is compiled (``blackdrez compile
# --core``): every attribute their __init__ sets (Connection's: its __slots__ too); the calls of
# each frame's path typed, so that the compiled code calls and reads them directly.
cimport cython


cdef class Watch:
    cdef public object seat, seq


cdef class Outbox:
    cdef public list _waiting
    cdef public object _loop, _scheduled, _held, writes

    @cython.locals(client=Connection)
    cpdef _write(self, list waiting)


cdef class Connection:
    cdef public object ws, binary, player, name, bucket, max_buffer, token, tables
    cdef public object left_to_me, seated, order, outranked, answered_elsewhere, lobby, bot
    cdef public object violations, violations_since, last_seen, closing, close_timeout, on_close
    cdef public object address, acting, acted
    cdef public Outbox outbox
    cdef public list _out
    cdef public object _deflate, _protocol, _transport_write, _unsent

    cpdef _send_wire(self, data)
    cpdef flush(self)


@cython.locals(client=Connection, watch=Watch)
cpdef send_update(list viewers, broadcast, dict frames)
