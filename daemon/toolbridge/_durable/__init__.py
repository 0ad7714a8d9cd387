"""The replay engine: run state, durable steps, attempts, the error boundary, events."""
