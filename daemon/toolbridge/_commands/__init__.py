"""``step.sandbox``: commands and snippets as durable steps."""
