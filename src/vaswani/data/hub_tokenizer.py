"""The tokenizers of multilingual Hugging Face models (NLLB-200, mBART-50, M2M-100), giving the ids
their own tokenizers give.

NLLB-200 and mBART-50 ship a `tokenizer.json`, which the `tokenizers` library runs as
transformers 5 does (SentencePiece's normalisation, pieces, and the language codes as added
special tokens). M2M-100 ships a SentencePiece model and a piece -> id `vocab.json`; its language
tokens (`__fr__`) follow the vocabulary, in the order of the model's code list, then eight unused
"madeupword" ids. An mBART-50 folder without tokenizer.json has its SentencePiece model alone,
numbered as fairseq numbers it. Either way the text is encoded without the special tokens the
families add around it: the language codes and end-of-sentence are placed by the decoding
(`vaswani.languages`).

One departure on purpose: text that spells a special token ("</s>", "fra_Latn") stays text, as
in every vaswani tokenizer, so a user's text cannot end a sentence early or switch the language.
On any other text the ids are those of transformers' tokenizer (for an mBART-50 SentencePiece
model alone, spaces at a text's ends and runs of them as transformers 4's tokenizer read them).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from vaswani.data.spm import SentencePieceTokenizer, read_vocab
from vaswani.data.tokenizer_file import TokenizerFile

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"

# M2M-100's language codes in the order of their ids (fairseq's `m2m100` list, which
# transformers' M2M100Tokenizer holds as FAIRSEQ_LANGUAGE_CODES), and the WMT21 models' list.
M2M100_CODE_TEXT = """
af am ar ast az ba be bg bn br bs ca ceb cs cy da de el en es et fa ff fi fr fy ga gd gl
gu ha he hi hr ht hu hy id ig ilo is it ja jv ka kk km kn ko lb lg ln lo lt lv mg mk ml
mn mr ms my ne nl no ns oc or pa pl ps pt ro ru sd si sk sl so sq sr ss su sv sw ta th
tl tn tr uk ur uz vi wo xh yi yo zh zu
"""
M2M100_CODES = M2M100_CODE_TEXT.split()
WMT21_CODES = ["en", "ha", "is", "ja", "cs", "ru", "zh", "de"]
M2M_CODE_LISTS = {"m2m100": M2M100_CODES, "wmt21": WMT21_CODES}
MADEUP_WORDS = 8
# mBART-50's language codes in the order of their ids (transformers' MBart50Tokenizer holds them
# as FAIRSEQ_LANGUAGE_CODES), for a folder with its SentencePiece model and no tokenizer.json.
MBART50_CODE_TEXT = """
ar_AR cs_CZ de_DE en_XX es_XX et_EE fi_FI fr_XX gu_IN hi_IN it_IT ja_XX kk_KZ ko_KR lt_LT
lv_LV my_MM ne_NP nl_XX ro_RO ru_RU si_LK tr_TR vi_VN zh_CN af_ZA az_AZ bn_IN fa_IR he_IL
hr_HR id_ID ka_GE km_KH mk_MK ml_IN mn_MN mr_IN pl_PL ps_AF pt_XX sv_SE sw_KE ta_IN te_IN
th_TH tl_XX uk_UA ur_PK xh_ZA gl_ES sl_SI
"""
MBART50_CODES = MBART50_CODE_TEXT.split()
MASK = "<mask>"


class JsonTokenizer(TokenizerFile):
    """A `tokenizer.json` (NLLB-200, mBART-50): text <-> ids with the model's own pieces and
    special ids (not vaswani's 0..3), and as many ids as the model has (`ids`: NLLB-200's are two
    more than its tokenizer's, 256,206 and 256,204)."""

    def __init__(self, path: Path, ids: int | None = None) -> None:
        from tokenizers import Tokenizer

        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as error:  # tokenizers raises bare Exceptions for bad files
            raise ValueError(f"{path}: not a tokenizer.json ({error})") from None
        # A tokenizer.json saved after a padded call pads every batch to its longest text.
        tokenizer.no_padding()
        tokenizer.no_truncation()
        try:
            super().__init__(tokenizer, [PAD, BOS, EOS, UNK])
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from None
        self.size = max(ids or 0, tokenizer.get_vocab_size())

    @property
    def vocab_size(self) -> int:
        return self.size

    def tokens(self, ids: Iterable[int]) -> list[str]:
        """Each id's piece with the word-boundary mark shown as a space (for attention plots)."""
        return [(self.tokenizer.id_to_token(i) or UNK).replace("\u2581", " ") for i in ids]


def m2m_vocabulary(vocab_file: Path, codes: list[str]) -> dict[str, int]:
    """M2M-100's ids: `vocab.json`'s, then `__xx__` for each code of `codes`, then the unused
    madeup words, as transformers' M2M100Tokenizer numbers them."""
    vocab = read_vocab(vocab_file)
    size = len(vocab)
    if sorted(vocab.values()) != list(range(size)):
        raise ValueError(f"{vocab_file}: the ids are not 0..{size - 1}")
    for i, code in enumerate(codes):
        vocab[f"__{code}__"] = size + i
    for i in range(MADEUP_WORDS):
        vocab[f"madeupword{i:04d}"] = size + len(codes) + i
    return vocab


def mbart_vocabulary(model_file: Path, codes: list[str]) -> dict[str, int]:
    """mBART-50's ids from its SentencePiece model alone, as fairseq numbers them: <s> <pad>
    </s> <unk>, each piece one after its SentencePiece id, then the language codes, then
    <mask> (transformers' MBart50Tokenizer)."""
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor()
    try:
        processor.Load(str(model_file))
    except (OSError, RuntimeError) as error:
        raise ValueError(f"{model_file}: not a SentencePiece model ({error})") from None
    vocab = {BOS: 0, PAD: 1, EOS: 2, UNK: 3}
    size = processor.get_piece_size()
    for i in range(3, size):  # SentencePiece's own 0..2 are <unk>, <s>, </s>
        vocab.setdefault(processor.id_to_piece(i), i + 1)
    for i, code in enumerate(codes):
        vocab[code] = size + 1 + i
    vocab[MASK] = size + 1 + len(codes)
    return vocab


class FairseqTokenizer(SentencePieceTokenizer):
    """A SentencePiece model with a fairseq model's ids (`m2m_vocabulary`, `mbart_vocabulary`)
    and its language tokens (`languages`), which decoding drops; decoding starts from
    end-of-sentence (`</s>`), as the family's decoder does."""

    def __init__(
        self,
        model_file: Path,
        vocab: dict[str, int],
        languages: list[str],
        ids: int | None = None,
    ) -> None:
        super().__init__(model_file, vocab)
        self._size = max(self._size, ids or 0)  # the model's ids, where it has more
        self.bos_id = self.eos_id
        self.languages = list(languages)
        """The language tokens, in the order of the model's code list."""
        self.special_ids |= {vocab[t] for t in [*languages, BOS, MASK] if t in vocab}

    def encode(self, text: str) -> list[int]:
        pieces = self.processor.encode(text, out_type=str)
        return [self.vocab.get(piece, self.unk_id) for piece in pieces]
