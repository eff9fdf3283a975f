"""Local process launcher: the whole stack as child processes on loopback (``inkstream up``)."""
