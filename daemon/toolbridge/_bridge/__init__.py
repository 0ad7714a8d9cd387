"""``Bridge``: opens the journal, serves gRPC to sandboxes, and runs durable runs.

A facade (``bridge``) over its parts, built and checked from its options when it is constructed
(``parts``), opened and closed with it (``lifecycle``), and the host's own tool calls (``calls``).
"""

from toolbridge._bridge.bridge import Bridge

__all__ = ["Bridge"]
