"""Call the host application's tools from code running in a toolbridge sandbox.

::

    from inngest_tools import tools, ToolError

    customer = await tools.getCustomer("cus_1")       # a plain function: positional arguments
    customer = await tools.getCustomer(id="cus_1")    # a tool.step: named, validated arguments

The daemon that started this process put its address and this command's token in the
environment (``TOOLBRIDGE_ADDRESS``, ``TOOLBRIDGE_TOKEN``); nothing else is needed.
"""

from inngest_tools._client import Tools, definitions, tools
from inngest_tools._errors import ToolError

__all__ = ["ToolError", "Tools", "definitions", "tools"]
