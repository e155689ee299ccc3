"""`python -m kerasseq ...`: the `kerasseq` command line (see `kerasseq_cli`)."""

import sys

from kerasseq_cli import main

if __name__ == "__main__":
    sys.exit(main())
