"""python3 -m partplan: see cli.py."""

import sys

from .cli import main

sys.exit(main())
