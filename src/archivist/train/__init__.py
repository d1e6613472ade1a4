"""Training what archivist ships: ``python -m archivist.train judge`` (the ``train`` extra)."""
