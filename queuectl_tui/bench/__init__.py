"""`queuectl bench`: measures the queue against the machine's own limits, on temporary
databases, never the user's."""
