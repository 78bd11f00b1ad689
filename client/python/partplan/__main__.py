"""python3 -m partplan: see cli.py."""

import os
import sys

from .cli import main

code = main()
# The process ends here: what it holds (the channel, a large response and
# its JSON) is the kernel's to free at once, not the interpreter's one
# object at a time, after the output is flushed.
try:
    sys.stdout.flush()
    sys.stderr.flush()
except BrokenPipeError:
    pass
os._exit(code)
