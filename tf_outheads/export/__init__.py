"""SavedModel / TF Serving export: raw strings in, translations and scores out.

`export_translator(model, source_tokenizer, target_tokenizer, path)` writes a
SavedModel whose `serving_default` signature translates a batch of raw source
strings with everything inside the graph (tokenization, search, detokenization,
`<unk>` replacement); `TranslatorModule` is the same as a `tf.Module`. See
`serving/README.md` for TF Serving. The directory is written whole, then
renamed into place (`tf_outheads.export.atomic`): a killed export never
leaves a partly written one.

`to_ctranslate2(model, source_tokenizer, target_tokenizer, path)` writes a
CTranslate2 model directory instead (Transformer models; the optional extra
`tf_outheads[ctranslate2]`), which `CTranslate2Translator` translates with.
"""

from tf_outheads.export.ctranslate2 import to_ctranslate2
from tf_outheads.export.ctranslate2_translator import CTranslate2Translator
from tf_outheads.export.translator_module import DEFAULT_BEAM_SIZES
from tf_outheads.export.translator_module import MAX_INPUT_BYTES
from tf_outheads.export.translator_module import MAX_REQUEST_PIECES
from tf_outheads.export.translator_module import MAX_REQUEST_SOURCES
from tf_outheads.export.translator_module import MAX_SOURCE_LENGTH
from tf_outheads.export.translator_module import TranslatorModule
from tf_outheads.export.translator_module import export_options
from tf_outheads.export.translator_module import export_translator

__all__ = [
    "CTranslate2Translator",
    "DEFAULT_BEAM_SIZES",
    "MAX_INPUT_BYTES",
    "MAX_REQUEST_PIECES",
    "MAX_REQUEST_SOURCES",
    "MAX_SOURCE_LENGTH",
    "TranslatorModule",
    "export_options",
    "export_translator",
    "to_ctranslate2",
]
