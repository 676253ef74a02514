"""The tracer's error."""


class TraceError(Exception):
    """A graph Kiln cannot take, with a message naming the node."""
