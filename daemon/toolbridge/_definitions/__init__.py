"""Tool definitions in each model API's format."""
