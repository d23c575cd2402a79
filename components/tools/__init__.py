"""The CLI (``cli``: ``python -m components …``), the offline engine (``mockengine``, ``report``,
``manifests``), checks (``validate``, ``scan``, ``roles``, ``endpoints``, ``reach``), pre-flight and
day 2 (``steps``, ``replacement``, ``review``, ``teardown``), and the reference generator (``docs``).
Nothing in ``platform`` or ``program`` imports this package."""
