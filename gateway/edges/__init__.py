"""The steps around assembly that do I/O, and the gateway's own tools (``edges.Edges`` lists them).

``api/`` holds the HTTP doors; what a request meets before and after the pure passes
(adopting checkpoints, memory, tool-usage learning) and the loop that answers the tools the
gateway offers itself live here, each a long-lived object built at start-up.
"""
