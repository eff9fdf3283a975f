"""Model families served by inkstream; see :mod:`models.registry` and :mod:`models.base`."""
