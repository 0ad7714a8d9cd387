"""OpenTelemetry: spans for runs, commands and calls as they happen (``tracing``), and a run
rebuilt from the journal as OTLP spans with the same ids (``otlp``)."""
