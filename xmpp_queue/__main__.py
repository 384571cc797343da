"""``python -m xmpp_queue``: the same as the ``xmpp-queue`` console script."""

from xmpp_queue.cli import main

raise SystemExit(main())
