"""The journal: the only place that stores anything, behind the ``Journal`` protocol (``base``)."""
