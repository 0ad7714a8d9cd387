"""The sandbox's door for programs and for the network: shims (``tool.shim``) and egress.

It starts nothing and launches nothing: beside a command's launch it serves the sockets a
shimmed program and the egress proxy reach, writes the shim scripts put on the command's
PATH, and says what the launch must add (variables, read-only paths, a wrapper in front of
the command). Every passage through it is a step of the command's run.
"""
