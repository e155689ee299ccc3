"""`python -m kerasseq.cli ...`: the same command line as `python -m kerasseq`."""

import sys

from kerasseq.cli import main

if __name__ == "__main__":
    sys.exit(main())
