"""Word alignments: read from attention (`merge`), scored (`scores`), made by eflomal
(`references`), learned by a shifted head on a frozen Transformer (`head`)."""

from kerasseq.alignment.head import ShiftedAlignmentHead, train_alignment_head
from kerasseq.alignment.merge import (
    ALIGNMENT_HEAD,
    ALIGNMENT_LAYER,
    LINK_METHODS,
    align_ids,
    align_texts,
    attention_heads,
    default_alignment_head,
    links_from_weights,
    word_starts,
)
from kerasseq.alignment.references import reference_alignments
from kerasseq.alignment.scores import (
    alignment_scores,
    diagonal_links,
    from_pharaoh,
    symmetrize,
    target_word_hit_rate,
    to_pharaoh,
)

__all__ = [
    "ALIGNMENT_HEAD", "ALIGNMENT_LAYER", "LINK_METHODS", "align_ids", "align_texts",
    "alignment_scores", "attention_heads", "default_alignment_head", "diagonal_links", "from_pharaoh",
    "links_from_weights", "reference_alignments", "symmetrize", "target_word_hit_rate",
    "to_pharaoh", "word_starts", "ShiftedAlignmentHead", "train_alignment_head",
]
