"""`python -m kerasseq_cli ...`: the `kerasseq` command line without importing kerasseq first."""

import sys

from kerasseq_cli import main

if __name__ == "__main__":
    sys.exit(main())
