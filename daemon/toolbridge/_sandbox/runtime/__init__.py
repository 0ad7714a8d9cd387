"""What a sandbox needs to run the clients: the Python venv and the Node client."""
