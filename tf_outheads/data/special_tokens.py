"""Ids of the special tokens, fixed across tokenizers, models and decoders.

SentencePiece models trained by :func:`tf_outheads.data.train_sentencepiece` put
these pieces at these ids, so a padded batch, a loss mask and a decoder's stop
condition agree without passing a vocabulary around.
"""

PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3

PAD_PIECE = "<pad>"
UNK_PIECE = "<unk>"
BOS_PIECE = "<s>"
EOS_PIECE = "</s>"
