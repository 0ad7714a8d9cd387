"""The journal on PostgreSQL: many daemons on many hosts sharing one database (:mod:`.journal`)."""

from toolbridge._journal.postgres.journal import PostgresJournal
from toolbridge._journal.postgres.statements import redact

__all__ = ["PostgresJournal", "redact"]
