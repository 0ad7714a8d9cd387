"""The gRPC edge: the only importer of the generated code."""
