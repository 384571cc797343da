"""Private, loopback-only XMPP servers for tests, the demo and benchmarks.

Each runner writes its own config into a temporary directory, listens on free
127.0.0.1 ports, registers the users it is given and stops by PID. They never
touch the system services, their ports or their data.
"""

from xmpp_queue.servers._process import ServerError, ServerNotInstalled, free_port
from xmpp_queue.servers.ejabberd import PrivateEjabberd
from xmpp_queue.servers.prosody import PrivateProsody

__all__ = ["PrivateEjabberd", "PrivateProsody", "ServerError", "ServerNotInstalled", "free_port"]
