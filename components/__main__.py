"""``python -m components …``: the offline CLI (``components.tools.cli``)."""

from .tools.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
