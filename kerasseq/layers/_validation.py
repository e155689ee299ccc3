"""The argument checks of the layers: `kerasseq._validation`, re-exported."""

from kerasseq._validation import check_choice, check_positive_int, check_rate

__all__ = ["check_choice", "check_positive_int", "check_rate"]
