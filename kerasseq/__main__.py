"""`python -m kerasseq ...`: the `kerasseq` command line (see `kerasseq.cli`)."""

import sys

from kerasseq.cli import main

if __name__ == "__main__":
    sys.exit(main())
