"""Corpora, cleaning, subword tokenizers and tf.data pipelines.

Read a corpus (:func:`read_tsv`, :func:`read_parallel_files`), clean it
(:func:`clean`, :func:`strip_suffixes`), train or load SentencePiece models
(:func:`build_tokenizers`, :func:`load_tokenizers`; :func:`tokenizer_fingerprints`
ties a model to them) and build batches (:func:`make_training_dataset`,
:func:`make_inference_dataset`). Corpora too large for memory stream from
text files (:func:`scan_parallel_files`, :func:`make_text_dataset`);
:func:`file_fingerprint` and :func:`fingerprint_changes` tell whether a data file
changed since a run read it. Target word vectors for continuous-output heads
come from :func:`train_word_vectors`, :func:`load_word_vectors` and
:func:`target_embedding_table`. Source–target word pairs for shared-private
embeddings come from :func:`build_word_pairs` (:class:`WordPairs`). Special-token ids live in
:mod:`tf_outheads.data.special_tokens`.
"""

from tf_outheads.data import special_tokens
from tf_outheads.data.corpus import CleaningReport
from tf_outheads.data.corpus import CorpusError
from tf_outheads.data.corpus import ParallelCorpus
from tf_outheads.data.corpus import clean
from tf_outheads.data.corpus import read_parallel_files
from tf_outheads.data.corpus import read_tsv
from tf_outheads.data.corpus import strip_suffixes
from tf_outheads.data.fingerprint import file_fingerprint
from tf_outheads.data.fingerprint import fingerprint_changes
from tf_outheads.data.pipeline import batch_pairs
from tf_outheads.data.pipeline import count_tokens
from tf_outheads.data.pipeline import dataset_from_corpus
from tf_outheads.data.pipeline import make_inference_dataset
from tf_outheads.data.pipeline import make_training_dataset
from tf_outheads.data.special_tokens import BOS_ID
from tf_outheads.data.streaming import CleaningRules
from tf_outheads.data.subword_sampling import SubwordSampling
from tf_outheads.data.streaming import FileScan
from tf_outheads.data.streaming import Reservoir
from tf_outheads.data.streaming import file_pairs
from tf_outheads.data.streaming import make_text_dataset
from tf_outheads.data.streaming import scan_parallel_files
from tf_outheads.data.streaming import text_pairs
from tf_outheads.data.special_tokens import EOS_ID
from tf_outheads.data.special_tokens import PAD_ID
from tf_outheads.data.special_tokens import UNK_ID
from tf_outheads.data.subword_tokenizer import SubwordTokenizer
from tf_outheads.data.subword_tokenizer import TokenizerError
from tf_outheads.data.tokenizer import build_tokenizers
from tf_outheads.data.tokenizer import load_tokenizers
from tf_outheads.data.tokenizer import tokenizer_fingerprints
from tf_outheads.data.subword_tokenizer import train_sentencepiece
from tf_outheads.data.vocabulary_update import merge_sentencepiece
from tf_outheads.data.vocabulary_update import piece_map
from tf_outheads.data.vocabulary_update import updated_model_proto
from tf_outheads.data.target_table import TargetTable
from tf_outheads.data.word_vectors import align_word_vectors
from tf_outheads.data.word_vectors import write_word_vectors
from tf_outheads.data.word_vectors import load_word_vectors
from tf_outheads.data.target_table import target_embedding_table
from tf_outheads.data.word_vectors import train_word_vectors
from tf_outheads.data.word_pair_table import PairingError
from tf_outheads.data.word_pair_table import WordPairs
from tf_outheads.data.alignment_links import attention_links
from tf_outheads.data.word_pairs import build_word_pairs
from tf_outheads.data.alignment_links import eflomal_links
from tf_outheads.data.word_pairs import split_words
from tf_outheads.data.word_pairs import word_pairs_from_tokenizers
from tf_outheads.data.word_pairs import word_vocabulary

__all__ = [
    "special_tokens",
    "PAD_ID",
    "UNK_ID",
    "BOS_ID",
    "EOS_ID",
    "CorpusError",
    "ParallelCorpus",
    "CleaningReport",
    "read_tsv",
    "read_parallel_files",
    "clean",
    "strip_suffixes",
    "train_sentencepiece",
    "SubwordTokenizer",
    "build_tokenizers",
    "load_tokenizers",
    "tokenizer_fingerprints",
    "TokenizerError",
    "make_training_dataset",
    "batch_pairs",
    "dataset_from_corpus",
    "CleaningRules",
    "FileScan",
    "Reservoir",
    "file_pairs",
    "scan_parallel_files",
    "text_pairs",
    "make_text_dataset",
    "SubwordSampling",
    "file_fingerprint",
    "fingerprint_changes",
    "make_inference_dataset",
    "count_tokens",
    "merge_sentencepiece",
    "piece_map",
    "updated_model_proto",
    "train_word_vectors",
    "align_word_vectors",
    "write_word_vectors",
    "load_word_vectors",
    "target_embedding_table",
    "TargetTable",
    "PairingError",
    "WordPairs",
    "attention_links",
    "build_word_pairs",
    "eflomal_links",
    "split_words",
    "word_pairs_from_tokenizers",
    "word_vocabulary",
]
