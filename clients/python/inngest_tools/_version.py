"""The release's version, in one place.

Both Python distributions read it at build time (hatch's version source): ``inngest-tools``
from here, ``toolbridge`` from this same file in the checkout or its sdist. The build of
``toolbridge`` refuses to run when its ``inngest-tools`` range or the npm package's
``package.json`` disagree with it; ``scripts/set_version.py`` changes all three at once.
"""

__version__ = "0.1.0"
