"""Tool declarations: tools, their context, durable functions and event types."""
