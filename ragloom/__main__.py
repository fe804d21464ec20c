"""`python -m ragloom` is the `ragloom` command."""

import sys

from ragloom.cli import main

sys.exit(main())
