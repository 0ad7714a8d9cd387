"""Pure validation: schemas from pydantic models, JSON Schema dicts and signatures."""
