"""Server-sent events: the `data` of each event of a byte stream (the Streamable HTTP profile's
GET streams carry one JSON-RPC message per event)."""

from __future__ import annotations

from collections.abc import AsyncIterator


async def sse_data(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Each event's data (its `data:` lines joined by newlines), as the event ends.

    Comments (`:` lines, the keep-alives), `event:`, `id:` and `retry:` fields and events
    without data are skipped; lines end in LF, CRLF or CR."""
    pending = bytearray()
    data: list[bytes] = []
    async for chunk in chunks:
        scan = max(len(pending) - 1, 0)  # where the unfinished line may end: not before here
        pending += chunk
        start = 0
        while True:
            cut = _line_end(pending, max(start, scan))
            if cut is None:
                break
            end, after = cut
            line = bytes(pending[start:end])
            start = scan = after
            if not line:
                if data:
                    yield b"\n".join(data)
                    data = []
                continue
            name, _, value = line.partition(b":")
            if name == b"data":
                data.append(value[1:] if value.startswith(b" ") else value)
        del pending[:start]
    # A stream that ends mid-event: the incomplete event is dropped, as the SSE spec says.


def _line_end(buffer: bytearray, start: int) -> tuple[int, int] | None:
    """Where the first line end at or after `start` is, and where the next line begins; None
    if there is none yet."""
    lf = buffer.find(b"\n", start)
    cr = buffer.find(b"\r", start, None if lf < 0 else lf)
    if cr < 0 or (0 <= lf < cr):
        return None if lf < 0 else (lf, lf + 1)
    if cr == len(buffer) - 1:
        return None  # a CR at the end may be the first half of CRLF
    return (cr, cr + 2) if buffer[cr + 1] == 0x0A else (cr, cr + 1)  # CRLF, or a lone CR
