// Kokoro-82M's text frontend: text -> Kokoro's phoneme string, through espeak-ng (docs/models.md "Kokoro's text
// frontend"). It follows the espeak path of Kokoro's own pipeline: espeak-ng's IPA with stress marks and tied
// multi-letter phonemes, the punctuation marks `;:,.!?¡¿—…"«»“”(){}[]` put back where the text had them (espeak-ng
// drops them), then Kokoro's mapping onto its alphabet (A I O W Y Q ʧ ʤ ᵊ T ...) and its vocabulary.
//
// Upstream's English (a, b) looks most words up in its own dictionaries and asks espeak-ng only for unknown words;
// here espeak-ng speaks every word, through the same fallback mapping upstream applies to espeak-ng's answers. So
// English pronunciations are espeak-ng's, in Kokoro's alphabet ("Kokoro" is kəkˈɔɹO here, kˈOkəɹO upstream).
// Japanese (j) and Mandarin (z) have no espeak-ng path upstream: espeak-ng cannot give Kokoro's phonemes for them.
// Text is refused where espeak-ng 1.51 would cut it short or break on it (phonemizer.cpp says what broke): a word of
// more than max_word_bytes, and letters of a script the language does not read.
//
// espeak-ng keeps all of its state in globals: it is set up once per process, and every call into it holds one
// process-wide lock. A phonemizer may be used from any number of threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

// One model call's worth of text: at most voxd_kokoro_phonemizer::max_phonemes code points of phonemes.
struct voxd_kokoro_piece {
    std::string phonemes;  // UTF-8; every code point is in Kokoro's vocabulary
    size_t text_begin = 0; // the source text this piece speaks, as byte offsets into the text given
    size_t text_end   = 0;
};

class voxd_kokoro_phonemizer {
public:
    // Kokoro's context is 512 tokens, two of them the padding around the phonemes.
    static constexpr size_t max_phonemes = 510;
    // espeak-ng silently cuts a word near 150 bytes; a longer run of letters or digits is refused instead.
    static constexpr size_t max_word_bytes = 128;

    // Sets espeak-ng up on first use in the process, reading its data from `data_dir` (empty: ESPEAK_DATA_PATH, else
    // the directory espeak-ng was built with: Debian's /usr/lib/x86_64-linux-gnu/espeak-ng-data). Throws
    // voxd_error("engine_unavailable") when the data cannot be read, and ("model_load_failed") when espeak-ng is
    // already set up with another directory.
    explicit voxd_kokoro_phonemizer(const std::string & data_dir);

    // Kokoro's phoneme string for the whole of `text` (UTF-8), in the language `lang_code`: a, b, e, f, h, i, p or
    // upstream's aliases en-us, en-gb, es, fr-fr, hi, it, pt-br. Line breaks, tabs and control characters count as
    // spaces; code points outside Kokoro's vocabulary are dropped. No length limit: see chunks(). Throws
    // voxd_error("invalid_argument") for another language (j and z included), text that is not UTF-8, a word
    // longer than max_word_bytes, or a letter of another script than the language's (Latin; Hindi: Devanagari and
    // Latin); voxd_error("engine_unavailable") when espeak-ng's data lacks the language's voice.
    std::string phonemize(const std::string & text, const std::string & lang_code) const;

    // `text` cut into pieces of at most max_phonemes phonemes, in order, each one model call: a line break always
    // ends a piece; otherwise a piece takes as many sentences as fit, and a sentence too long for one piece is cut at
    // its last `:` or `;` that fits, else its last `,` or `—`, else between words (never inside one). Cuts at
    // punctuation change nothing of the phonemes (espeak-ng reads between the marks); only a run of words without
    // punctuation that is too long for one piece is read word by word. Whitespace-only text gives no pieces.
    // Throws as phonemize(), and voxd_error("invalid_argument") for a word whose phonemes alone exceed max_phonemes.
    std::vector<voxd_kokoro_piece> chunks(const std::string & text, const std::string & lang_code) const;

    // espeak-ng's version ("1.51") and the data directory it reads.
    const std::string & espeak_version() const { return m_version; }
    const std::string & data_dir() const { return m_data_dir; }

private:
    std::string m_version;
    std::string m_data_dir;
};

// Kokoro's token ids of a phoneme string (config.json's `vocab`), without the padding 0 at either end; code points
// outside the vocabulary are skipped.
std::vector<int32_t> voxd_kokoro_token_ids(const std::string & phonemes);
