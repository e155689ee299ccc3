"""Word alignments: read from attention (`merge`), scored (`scores`), made by eflomal (`references`)."""

from kerasseq.alignment.merge import (
    ALIGNMENT_HEAD,
    ALIGNMENT_LAYER,
    align_ids,
    align_texts,
    alignment_strings,
    attention_heads,
    check_alignable,
    default_alignment_head,
    links_from_weights,
    merge_pieces,
    resolve_alignment_head,
    select_heads,
    word_starts,
)
from kerasseq.alignment.references import reference_alignments, word_links_to_pieces
from kerasseq.alignment.scores import (
    alignment_scores,
    diagonal_links,
    from_pharaoh,
    symmetrize,
    target_word_hit_rate,
    to_pharaoh,
)

__all__ = [
    "ALIGNMENT_HEAD", "ALIGNMENT_LAYER", "align_ids", "align_texts", "alignment_scores",
    "alignment_strings", "attention_heads", "check_alignable", "default_alignment_head",
    "diagonal_links", "from_pharaoh", "links_from_weights", "merge_pieces", "reference_alignments",
    "resolve_alignment_head", "select_heads", "symmetrize", "target_word_hit_rate", "to_pharaoh",
    "word_links_to_pieces", "word_starts",
]
