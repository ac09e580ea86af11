#include "tts/kokoro/phonemizer.h"
#include "common/error.h"

#include <espeak-ng/espeak_ng.h>
#include <espeak-ng/speak_lib.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace {

// Kokoro v1.0's vocabulary (config.json `vocab`): code point, token id.
struct vocab_entry {
    char32_t cp;
    int32_t id;
};
constexpr vocab_entry k_vocab[] = {
    { 0x003B, 1 },   { 0x003A, 2 },   { 0x002C, 3 },   { 0x002E, 4 },   { 0x0021, 5 },   { 0x003F, 6 },   { 0x2014, 9 },   { 0x2026, 10 },  { 0x0022, 11 },
    { 0x0028, 12 },  { 0x0029, 13 },  { 0x201C, 14 },  { 0x201D, 15 },  { 0x0020, 16 },  { 0x0303, 17 },  { 0x02A3, 18 },  { 0x02A5, 19 },  { 0x02A6, 20 },
    { 0x02A8, 21 },  { 0x1D5D, 22 },  { 0xAB67, 23 },  { 0x0041, 24 },  { 0x0049, 25 },  { 0x004F, 31 },  { 0x0051, 33 },  { 0x0053, 35 },  { 0x0054, 36 },
    { 0x0057, 39 },  { 0x0059, 41 },  { 0x1D4A, 42 },  { 0x0061, 43 },  { 0x0062, 44 },  { 0x0063, 45 },  { 0x0064, 46 },  { 0x0065, 47 },  { 0x0066, 48 },
    { 0x0068, 50 },  { 0x0069, 51 },  { 0x006A, 52 },  { 0x006B, 53 },  { 0x006C, 54 },  { 0x006D, 55 },  { 0x006E, 56 },  { 0x006F, 57 },  { 0x0070, 58 },
    { 0x0071, 59 },  { 0x0072, 60 },  { 0x0073, 61 },  { 0x0074, 62 },  { 0x0075, 63 },  { 0x0076, 64 },  { 0x0077, 65 },  { 0x0078, 66 },  { 0x0079, 67 },
    { 0x007A, 68 },  { 0x0251, 69 },  { 0x0250, 70 },  { 0x0252, 71 },  { 0x00E6, 72 },  { 0x03B2, 75 },  { 0x0254, 76 },  { 0x0255, 77 },  { 0x00E7, 78 },
    { 0x0256, 80 },  { 0x00F0, 81 },  { 0x02A4, 82 },  { 0x0259, 83 },  { 0x025A, 85 },  { 0x025B, 86 },  { 0x025C, 87 },  { 0x025F, 90 },  { 0x0261, 92 },
    { 0x0265, 99 },  { 0x0268, 101 }, { 0x026A, 102 }, { 0x029D, 103 }, { 0x026F, 110 }, { 0x0270, 111 }, { 0x014B, 112 }, { 0x0273, 113 }, { 0x0272, 114 },
    { 0x0274, 115 }, { 0x00F8, 116 }, { 0x0278, 118 }, { 0x03B8, 119 }, { 0x0153, 120 }, { 0x0279, 123 }, { 0x027E, 125 }, { 0x027B, 126 }, { 0x0281, 128 },
    { 0x027D, 129 }, { 0x0282, 130 }, { 0x0283, 131 }, { 0x0288, 132 }, { 0x02A7, 133 }, { 0x028A, 135 }, { 0x028B, 136 }, { 0x028C, 138 }, { 0x0263, 139 },
    { 0x0264, 140 }, { 0x03C7, 142 }, { 0x028E, 143 }, { 0x0292, 147 }, { 0x0294, 148 }, { 0x02C8, 156 }, { 0x02CC, 157 }, { 0x02D0, 158 }, { 0x02B0, 162 },
    { 0x02B2, 164 }, { 0x2193, 169 }, { 0x2192, 171 }, { 0x2197, 172 }, { 0x2198, 173 }, { 0x1D7B, 177 },
};

// The token id of `cp`, or -1 outside the vocabulary.
int32_t token_id(char32_t cp) {
    static const std::unordered_map<char32_t, int32_t> ids = [] {
        std::unordered_map<char32_t, int32_t> m;
        for (const vocab_entry & e : k_vocab) {
            m.emplace(e.cp, e.id);
        }
        return m;
    }();
    const auto it = ids.find(cp);
    return it == ids.end() ? -1 : it->second;
}

// How espeak-ng's IPA becomes Kokoro's alphabet (docs/models.md "Kokoro's text frontend").
enum class mapping { american, british, other };

// The letters a language's text may have. espeak-ng hands a letter of another script (and Hindi's symbols) to
// another language's rules, and that switch is where espeak-ng 1.51 reads freed memory and crashes (found by
// fuzzing it under AddressSanitizer). So text is kept from the switches that broke it: the Latin-script languages
// take Latin letters only (with digits, symbols and emoji, which fuzzed clean); Hindi takes Devanagari, and its Latin
// words and symbols are read by the English voice apart, which is what espeak-ng's Hindi switches to for them.
enum class script { latin, devanagari };

struct kokoro_language {
    const char * code;  // Kokoro's lang_code
    const char * alias; // upstream's longer name for it
    const char * voice; // espeak-ng's voice: its file under espeak-ng-data/lang
    const char * name;
    mapping map;
    script letters;
};

// The voices are those upstream's phonemizer picks for en-us, en-gb, es, fr-fr, hi, it and pt-br: the first voice
// espeak-ng lists for that language.
constexpr kokoro_language k_languages[] = {
    { "a", "en-us", "gmw/en-US", "American English", mapping::american, script::latin },
    { "b", "en-gb", "gmw/en", "British English", mapping::british, script::latin },
    { "e", "es", "roa/es", "Spanish", mapping::other, script::latin },
    { "f", "fr-fr", "roa/fr", "French", mapping::other, script::latin },
    { "h", "hi", "inc/hi", "Hindi", mapping::other, script::devanagari },
    { "i", "it", "roa/it", "Italian", mapping::other, script::latin },
    { "p", "pt-br", "roa/pt-BR", "Brazilian Portuguese", mapping::other, script::latin },
};

const kokoro_language & language_of(const std::string & code) {
    for (const kokoro_language & l : k_languages) {
        if (code == l.code || code == l.alias) {
            return l;
        }
    }
    const bool japanese = code == "j" || code == "ja";
    if (japanese || code == "z" || code == "zh") {
        throw voxd_error("invalid_argument", std::string("Kokoro's ") + (japanese ? "Japanese" : "Mandarin Chinese") + " ('" + code +
                                                 "') is not spoken: its text frontend, espeak-ng, cannot give Kokoro's phonemes for Japanese or Chinese");
    }
    std::string known;
    for (const kokoro_language & l : k_languages) {
        known += std::string(known.empty() ? "" : ", ") + l.code + " (" + l.name + ")";
    }
    throw voxd_error("invalid_argument", "unknown Kokoro language '" + code + "': one of " + known);
}

// ---- text ----

// One code point of the text and the bytes it came from.
struct text_char {
    char32_t cp;
    size_t begin;
    size_t end;
};

// The punctuation marks upstream's phonemizer keeps (espeak-ng drops them): put back between what espeak-ng reads.
bool is_mark(char32_t c) {
    static const std::u32string marks = U";:,.!?¡¿—…\"«»“”(){}[]";
    return marks.find(c) != std::u32string::npos;
}

bool is_line_break(char32_t c) {
    return c == U'\n' || c == U'\r' || c == 0x2028 || c == 0x2029;
}

// Whitespace and control characters: all read as a space.
bool is_space(char32_t c) {
    return c <= 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}

bool is_ascii_letter(char32_t c) {
    return (c | 0x20) >= U'a' && (c | 0x20) <= U'z';
}

// Part of a word as far as espeak-ng's word length goes: other ASCII punctuation and symbols end a word there; an
// apostrophe does not ("s's's'..." is one word, whose suffixes overflow espeak-ng 1.51's buffers).
bool is_word_char(char32_t c) {
    if (c < 0x80) {
        return (c >= U'0' && c <= U'9') || is_ascii_letter(c) || c == U'\'';
    }
    return !is_space(c) && !is_mark(c);
}

bool is_devanagari(char32_t c) {
    return (c >= 0x900 && c < 0x980) || (c >= 0xA8E0 && c < 0xA900);
}

// The blocks of letters of every other script (Greek to Hangul, and the supplementary planes' scripts); what is in
// none of these is a letter of the Latin script or Devanagari, or no letter (digits, punctuation, symbols, emoji).
bool is_other_script(char32_t c) {
    static const std::pair<char32_t, char32_t> blocks[] = {
        { 0x0370, 0x08FF }, { 0x0980, 0x1CFF }, { 0x1F00, 0x1FFF }, { 0x2C00, 0x2C5F }, { 0x2C80, 0x2DFF },   { 0x2E80, 0x2FDF },
        { 0x3040, 0x31FF }, { 0x3400, 0x4DBF }, { 0x4E00, 0xA6FF }, { 0xA800, 0xA8DF }, { 0xA900, 0xABFF },   { 0xAC00, 0xD7FF },
        { 0xF900, 0xFAFF }, { 0xFB13, 0xFDFF }, { 0xFE70, 0xFEFF }, { 0xFF66, 0xFFDC }, { 0x10000, 0x1EFFF }, { 0x20000, 0x3FFFF },
    };
    for (const auto & [first, last] : blocks) {
        if (c >= first && c <= last) {
            return true;
        }
    }
    return false;
}

std::vector<text_char> decode_utf8(const std::string & text) {
    std::vector<text_char> out;
    out.reserve(text.size());
    const auto byte = [&](size_t i) { return (unsigned char) text[i]; };
    for (size_t i = 0; i < text.size();) {
        const unsigned char b = byte(i);
        size_t n              = 0;
        char32_t cp           = 0;
        char32_t min          = 0;
        if (b < 0x80) {
            n  = 1;
            cp = b;
        } else if ((b & 0xE0) == 0xC0) {
            n   = 2;
            cp  = b & 0x1F;
            min = 0x80;
        } else if ((b & 0xF0) == 0xE0) {
            n   = 3;
            cp  = b & 0x0F;
            min = 0x800;
        } else if ((b & 0xF8) == 0xF0) {
            n   = 4;
            cp  = b & 0x07;
            min = 0x10000;
        }
        bool valid = n != 0 && i + n <= text.size();
        for (size_t k = 1; valid && k < n; k++) {
            valid = (byte(i + k) & 0xC0) == 0x80;
            cp    = (cp << 6) | (byte(i + k) & 0x3F);
        }
        if (!valid || cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            throw voxd_error("invalid_argument", "the text is not valid UTF-8 (at byte " + std::to_string(i) + ")");
        }
        out.push_back({ cp, i, i + n });
        i += n;
    }
    return out;
}

void append_utf8(std::string & out, char32_t cp) {
    if (cp < 0x80) {
        out += (char) cp;
    } else if (cp < 0x800) {
        out += (char) (0xC0 | (cp >> 6));
        out += (char) (0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += (char) (0xE0 | (cp >> 12));
        out += (char) (0x80 | ((cp >> 6) & 0x3F));
        out += (char) (0x80 | (cp & 0x3F));
    } else {
        out += (char) (0xF0 | (cp >> 18));
        out += (char) (0x80 | ((cp >> 12) & 0x3F));
        out += (char) (0x80 | ((cp >> 6) & 0x3F));
        out += (char) (0x80 | (cp & 0x3F));
    }
}

std::string to_utf8(const std::u32string & s) {
    std::string out;
    for (char32_t c : s) {
        append_utf8(out, c);
    }
    return out;
}

std::u32string from_utf8(const char * s) {
    std::u32string out;
    for (const text_char & c : decode_utf8(s)) {
        out += c.cp;
    }
    return out;
}

void replace_all(std::u32string & s, const std::u32string & from, const std::u32string & to) {
    for (size_t at = s.find(from); at != std::u32string::npos; at = s.find(from, at + to.size())) {
        s.replace(at, from.size(), to);
    }
}

// Refuses what espeak-ng would cut short or misread: a word longer than it reads (about 150 bytes), and letters of a
// script the language does not read.
void check_text(const std::string & text, const std::vector<text_char> & chars, const kokoro_language & language) {
    size_t start = 0;
    for (size_t i = 0; i <= chars.size(); i++) {
        if (i < chars.size() && (is_other_script(chars[i].cp) || (language.letters == script::latin && is_devanagari(chars[i].cp)))) {
            char code[16];
            std::snprintf(code, sizeof code, "U+%04X", (unsigned) chars[i].cp);
            throw voxd_error("invalid_argument", std::string("Kokoro's ") + language.name + " reads " +
                                                     (language.letters == script::latin ? "Latin letters" : "Devanagari and Latin letters") +
                                                     ": the text has " + code + " \"" + text.substr(chars[i].begin, chars[i].end - chars[i].begin) +
                                                     "\" at byte " + std::to_string(chars[i].begin));
        }
        if (i < chars.size() && is_word_char(chars[i].cp)) {
            continue;
        }
        if (i > start && chars[i - 1].end - chars[start].begin > voxd_kokoro_phonemizer::max_word_bytes) {
            const size_t bytes = chars[i - 1].end - chars[start].begin;
            throw voxd_error("invalid_argument", "the text has a word of " + std::to_string(bytes) + " bytes (\"" +
                                                     text.substr(chars[start].begin, chars[std::min(start + 16, i - 1)].begin - chars[start].begin) +
                                                     "…\" at byte " + std::to_string(chars[start].begin) + "); Kokoro reads words of at most " +
                                                     std::to_string(voxd_kokoro_phonemizer::max_word_bytes) + " bytes");
        }
        start = i + 1;
    }
}

// The text's lines (upstream reads each line on its own), each with its whitespace runs made one space and trimmed;
// empty lines are left out.
std::vector<std::vector<text_char>> lines_of(const std::vector<text_char> & chars) {
    std::vector<std::vector<text_char>> lines(1);
    for (const text_char & c : chars) {
        if (is_line_break(c.cp)) {
            if (!lines.back().empty()) {
                lines.emplace_back();
            }
            continue;
        }
        std::vector<text_char> & line = lines.back();
        if (!is_space(c.cp)) {
            line.push_back(c);
        } else if (!line.empty() && line.back().cp != U' ') {
            line.push_back({ U' ', c.begin, c.end });
        }
    }
    for (std::vector<text_char> & line : lines) {
        if (!line.empty() && line.back().cp == U' ') {
            line.pop_back();
        }
    }
    if (lines.back().empty()) {
        lines.pop_back();
    }
    return lines;
}

// What a cut after an atom ends: the chunker prefers the higher.
enum boundary { word = 0, phrase = 1, clause = 2, sentence = 3 };

// A stretch of one line that espeak-ng reads at once (no mark inside), and the marks (with their spaces) after it.
struct atom {
    std::vector<text_char> text; // what espeak-ng reads
    std::u32string marks;        // as they will be spoken
    boundary after    = word;    // what the marks end
    size_t text_begin = 0;       // the source bytes, spaces aside
    size_t text_end   = 0;
    std::u32string phonemes; // of `text`, then `marks`, in Kokoro's vocabulary
};

boundary boundary_of(const std::u32string & marks) {
    if (marks.find_first_of(U".!?…") != std::u32string::npos) {
        return sentence;
    }
    if (marks.find_first_of(U":;") != std::u32string::npos) {
        return clause;
    }
    if (marks.find_first_of(U",—") != std::u32string::npos) {
        return phrase;
    }
    return word;
}

// A line cut at its runs of marks, as upstream's phonemizer cuts it: a run is marks and the spaces around them.
std::vector<atom> atoms_of(const std::vector<text_char> & line) {
    std::vector<atom> atoms;
    size_t start = 0;
    for (size_t i = 0; i <= line.size();) {
        if (i < line.size() && !is_mark(line[i].cp)) {
            i++;
            continue;
        }
        size_t run_begin = i;
        while (run_begin > start && line[run_begin - 1].cp == U' ') {
            run_begin--;
        }
        size_t run_end = i;
        while (run_end < line.size() && (is_mark(line[run_end].cp) || line[run_end].cp == U' ')) {
            run_end++;
        }
        atom a;
        a.text.assign(line.begin() + (std::ptrdiff_t) start, line.begin() + (std::ptrdiff_t) run_begin);
        for (size_t k = run_begin; k < run_end; k++) {
            // Kokoro's vocabulary has curly quotes, not angle ones (upstream turns them so)
            const char32_t c = line[k].cp;
            a.marks += c == U'«' ? U'“' : c == U'»' ? U'”' : c;
        }
        a.after      = boundary_of(a.marks);
        size_t first = start, last = run_end;
        while (first < last && line[first].cp == U' ') {
            first++;
        }
        while (last > first && line[last - 1].cp == U' ') {
            last--;
        }
        if (first < last) {
            a.text_begin = line[first].begin;
            a.text_end   = line[last - 1].end;
            atoms.push_back(std::move(a));
        }
        start = i = run_end;
        if (run_end == line.size()) {
            break;
        }
    }
    return atoms;
}

// Keeps the code points of Kokoro's vocabulary.
std::u32string in_vocab(const std::u32string & s) {
    std::u32string out;
    for (char32_t c : s) {
        if (token_id(c) >= 0) {
            out += c;
        }
    }
    return out;
}

// Spaces made single and trimmed.
std::u32string tidy_spaces(const std::u32string & s) {
    std::u32string out;
    for (char32_t c : s) {
        if (c == U' ' && (out.empty() || out.back() == U' ')) {
            continue;
        }
        out += c;
    }
    if (!out.empty() && out.back() == U' ') {
        out.pop_back();
    }
    return out;
}

// ---- espeak-ng ----

// espeak-ng's process-wide state, behind one lock.
struct espeak_state {
    std::mutex mutex;
    bool ready = false;
    std::string data_dir; // as asked for
    std::string path;     // as espeak-ng reads it
    std::string version;
    bool before_1_52 = false;
    std::string voice; // the voice set now
};

// espeak-ng's English voice, for Hindi text's Latin words and symbols: the voice its Hindi switches to for them.
const char * const k_english_in_hindi_voice = "gmw/en";

espeak_state & espeak() {
    static espeak_state state;
    return state;
}

// IPA (bit 1), multi-letter phonemes tied (bit 7) with U+0361 (bits 8-23), as upstream's phonemizer asks.
constexpr int k_phoneme_mode = 0x02 | 0x80 | (0x0361 << 8);

// What espeak-ng says for `text`, clause by clause joined with spaces; the caller holds the lock.
std::u32string espeak_ipa(const std::string & text) {
    std::string out;
    const void * at = text.c_str();
    while (at != nullptr) {
        const void * before = at;
        const char * clause = espeak_TextToPhonemes(&at, espeakCHARS_UTF8, k_phoneme_mode);
        if (clause != nullptr && *clause != '\0') {
            out += out.empty() ? "" : " ";
            out += clause;
        }
        if (at == before) {
            break; // no progress: never loop on it
        }
    }
    std::u32string ipa = from_utf8(out.c_str());
    // language switches, "(en)" ... "(fr)" (their letters tied as well): the flags go, the words stay
    for (size_t open = ipa.find(U'('); open != std::u32string::npos; open = ipa.find(U'(', open)) {
        const size_t close = ipa.find(U')', open + 2);
        if (close == std::u32string::npos) {
            break;
        }
        ipa.erase(open, close - open + 1);
    }
    for (char32_t & c : ipa) {
        c = c == 0x0361 ? U'^' : c == U'\n' ? U' ' : c;
    }
    return tidy_spaces(ipa);
}

// Upstream's mapping of espeak-ng's English onto Kokoro's alphabet (its fallback for unknown words), in its order.
void map_english(std::u32string & ps, bool british, bool before_1_52) {
    // longest first, each replaced everywhere before the next
    static const std::pair<std::u32string, std::u32string> table[] = {
        { U"ʔˌn\u0329", U"ʔn" }, { U"ʔn\u0329", U"ʔn" }, { U"a^ɪ", U"I" }, { U"a^ʊ", U"W" }, { U"d^ʒ", U"ʤ" }, { U"e^ɪ", U"A" },   { U"t^ʃ", U"ʧ" },
        { U"ɔ^ɪ", U"Y" },        { U"ə^l", U"ᵊl" },      { U"ʲo", U"jo" }, { U"ʲə", U"jə" }, { U"e", U"A" },   { U"ʲ", U"" },      { U"ɚ", U"əɹ" },
        { U"r", U"ɹ" },          { U"x", U"k" },         { U"ç", U"k" },   { U"ɐ", U"ə" },   { U"ɬ", U"l" },   { U"\u0303", U"" },
    };
    for (const auto & [from, to] : table) {
        replace_all(ps, from, to);
    }
    // a syllabic consonant: ᵊ before it
    std::u32string syllabic;
    for (size_t i = 0; i < ps.size(); i++) {
        if (i + 1 < ps.size() && ps[i + 1] == 0x0329 && ps[i] != U' ') {
            syllabic += U'ᵊ';
            syllabic += ps[i];
            i++;
        } else if (ps[i] != 0x0329) {
            syllabic += ps[i];
        }
    }
    ps = syllabic;
    replace_all(ps, U"\u0329", U"");
    if (british) {
        replace_all(ps, U"e^ə", U"ɛː");
        replace_all(ps, U"iə", U"ɪə");
        replace_all(ps, U"ə^ʊ", U"Q");
    } else {
        replace_all(ps, U"o^ʊ", U"O");
        replace_all(ps, U"ɜːɹ", U"ɜɹ");
        replace_all(ps, U"ɜː", U"ɜɹ");
        replace_all(ps, U"ɪə", U"iə");
        replace_all(ps, U"ː", U"");
    }
    if (before_1_52) {
        replace_all(ps, U"o", U"ɔ"); // espeak-ng 1.52 changed this vowel itself
    }
    replace_all(ps, U"ɾ", U"T");
    replace_all(ps, U"ʔ", U"t");
    replace_all(ps, U"^", U"");
}

// Upstream's mapping of espeak-ng's other languages onto Kokoro's alphabet.
void map_other(std::u32string & ps) {
    static const std::pair<std::u32string, std::u32string> table[] = {
        { U"a^ɪ", U"I" }, { U"a^ʊ", U"W" }, { U"d^z", U"ʣ" }, { U"d^ʒ", U"ʤ" }, { U"e^ɪ", U"A" }, { U"o^ʊ", U"O" },
        { U"s^s", U"S" }, { U"t^s", U"ʦ" }, { U"t^ʃ", U"ʧ" }, { U"ɔ^ɪ", U"Y" }, { U"ə^ʊ", U"Q" },
    };
    for (const auto & [from, to] : table) {
        replace_all(ps, from, to);
    }
    replace_all(ps, U"^", U"");
    replace_all(ps, U"-", U"");
}

// Synthesis output goes nowhere: espeak-ng synthesizes only to free what a voice change queued (espeak_session).
int discard_audio(short *, int, espeak_EVENT *) {
    return 0;
}

// Holds espeak-ng's lock; sets voices.
class espeak_session {
public:
    espeak_session() : m_state(espeak()), m_lock(m_state.mutex) {}

    void use(const char * voice, const char * name) {
        if (m_state.voice == voice) {
            return;
        }
        m_state.voice.clear();
        if (espeak_ng_SetVoiceByName(voice) != ENS_OK) {
            throw voxd_error("engine_unavailable", std::string("espeak-ng has no voice ") + voice + " (" + name + ") in " + m_state.path);
        }
        // a voice change queues a copy of the voice for the synthesizer, which frees it only when it next runs: it
        // runs on nothing, or every change would leak that copy
        espeak_ng_Synthesize("", 1, 0, POS_CHARACTER, 0, espeakCHARS_UTF8, nullptr, nullptr);
        m_state.voice = voice;
    }

    bool before_1_52() const { return m_state.before_1_52; }

private:
    espeak_state & m_state;
    std::lock_guard<std::mutex> m_lock;
};

// Which voice reads a character of Hindi text: Hindi's reads Devanagari and digits; everything else (Latin words,
// symbols) goes to the English voice, which is what espeak-ng's Hindi would switch to for them; spaces go with either.
enum class reader { either, own, english };

reader reader_in_hindi(char32_t c) {
    if (c == U' ') {
        return reader::either;
    }
    return is_devanagari(c) || (c >= U'0' && c <= U'9') ? reader::own : reader::english;
}

// Kokoro's phonemes of what espeak-ng reads of `text` (check_text has passed it).
std::u32string kokoro_phonemes(const std::vector<text_char> & text, const kokoro_language & language, espeak_session & session) {
    const bool hindi = language.letters == script::devanagari;
    std::u32string ps;
    for (size_t start = 0; start < text.size();) {
        // the longest stretch one voice reads
        reader who = reader::either;
        size_t end = start;
        for (; end < text.size(); end++) {
            const reader r = hindi ? reader_in_hindi(text[end].cp) : reader::own;
            if (r != reader::either && who != reader::either && r != who) {
                break;
            }
            who = r == reader::either ? who : r;
        }
        std::string utf8;
        for (size_t i = start; i < end; i++) {
            append_utf8(utf8, text[i].cp);
        }
        if (who == reader::english) {
            session.use(k_english_in_hindi_voice, "English");
        } else {
            session.use(language.voice, language.name);
        }
        ps += (ps.empty() ? U"" : U" ") + espeak_ipa(utf8);
        start = end;
    }
    if (language.map == mapping::other) {
        map_other(ps);
    } else {
        map_english(ps, language.map == mapping::british, session.before_1_52());
    }
    return in_vocab(tidy_spaces(ps));
}

// Every atom's phonemes. With `split_long`, an atom whose phonemes exceed one piece becomes one atom per word (read
// word by word); a word that alone exceeds one piece is refused.
void phonemize_atoms(std::vector<atom> & atoms, const kokoro_language & language, bool split_long) {
    espeak_session session;
    std::vector<atom> out;
    for (atom & a : atoms) {
        a.phonemes = kokoro_phonemes(a.text, language, session) + in_vocab(a.marks);
        if (!split_long || tidy_spaces(a.phonemes).size() <= voxd_kokoro_phonemizer::max_phonemes) {
            out.push_back(std::move(a));
            continue;
        }
        const auto too_long = [](size_t byte) {
            return voxd_error("invalid_argument", "a word of the text and its punctuation (at byte " + std::to_string(byte) + ") give more than " +
                                                      std::to_string(voxd_kokoro_phonemizer::max_phonemes) + " phonemes, more than Kokoro reads at once");
        };
        if (a.text.empty()) {
            throw too_long(a.text_begin);
        }
        for (size_t word_start = 0; word_start < a.text.size();) {
            size_t word_end = word_start;
            while (word_end < a.text.size() && a.text[word_end].cp != U' ') {
                word_end++;
            }
            const bool last = word_end == a.text.size();
            atom w;
            w.text.assign(a.text.begin() + (std::ptrdiff_t) word_start, a.text.begin() + (std::ptrdiff_t) word_end);
            w.marks      = last ? a.marks : U" ";
            w.after      = last ? a.after : word;
            w.text_begin = w.text.front().begin;
            w.text_end   = last ? a.text_end : w.text.back().end;
            w.phonemes   = kokoro_phonemes(w.text, language, session) + in_vocab(w.marks);
            if (tidy_spaces(w.phonemes).size() > voxd_kokoro_phonemizer::max_phonemes) {
                throw too_long(w.text_begin);
            }
            out.push_back(std::move(w));
            word_start = word_end + 1;
        }
    }
    atoms = std::move(out);
}

std::u32string joined(const std::vector<atom> & atoms, size_t count) {
    std::u32string s;
    for (size_t i = 0; i < count; i++) {
        s += atoms[i].phonemes;
    }
    return tidy_spaces(s);
}

} // namespace

voxd_kokoro_phonemizer::voxd_kokoro_phonemizer(const std::string & data_dir) {
    // espeak-ng would silently take another directory (ESPEAK_DATA_PATH, ~/espeak-ng-data) for a missing one
    struct stat info;
    if (!data_dir.empty() && stat((data_dir + "/phontab").c_str(), &info) != 0) {
        throw voxd_error("engine_unavailable", "espeak-ng's data is missing: " + data_dir + "/phontab cannot be read");
    }
    espeak_state & state = espeak();
    std::lock_guard<std::mutex> lock(state.mutex);
    if (state.ready) {
        if (data_dir != state.data_dir && data_dir != state.path) {
            throw voxd_error("model_load_failed", "espeak-ng reads its data from " + state.path + " already, not " + data_dir + " (one directory per process)");
        }
    } else {
        espeak_ng_InitializePath(data_dir.empty() ? nullptr : data_dir.c_str());
        espeak_ng_ERROR_CONTEXT context = nullptr;
        // it also sets the process's LC_CTYPE to C.UTF-8: its character classes need a UTF-8 locale
        const espeak_ng_STATUS status = espeak_ng_Initialize(&context);
        if (status != ENS_OK) {
            char message[512];
            espeak_ng_GetStatusCodeMessage(status, message, sizeof message);
            espeak_ng_ClearErrorContext(&context);
            throw voxd_error("engine_unavailable", std::string("espeak-ng could not read its data") + (data_dir.empty() ? "" : " in " + data_dir) + ": " +
                                                       message + " (install Debian's espeak-ng-data package)");
        }
        espeak_ng_InitializeOutput(ENOUTPUT_MODE_SYNCHRONOUS, 0, nullptr);
        espeak_SetSynthCallback(discard_audio);
        const char * path = nullptr;
        state.version     = espeak_Info(&path);
        state.path        = path != nullptr ? path : data_dir;
        int major = 0, minor = 0;
        std::sscanf(state.version.c_str(), "%d.%d", &major, &minor);
        state.before_1_52 = major < 1 || (major == 1 && minor < 52);
        state.data_dir    = data_dir;
        state.ready       = true;
    }
    m_version  = state.version;
    m_data_dir = state.path;
}

std::string voxd_kokoro_phonemizer::phonemize(const std::string & text, const std::string & lang_code) const {
    const kokoro_language & language   = language_of(lang_code);
    const std::vector<text_char> chars = decode_utf8(text);
    check_text(text, chars, language);
    std::vector<atom> atoms;
    for (const std::vector<text_char> & line : lines_of(chars)) {
        for (atom & a : atoms_of(line)) {
            atoms.push_back(std::move(a));
        }
        if (!atoms.empty()) {
            atoms.back().marks += U' ';
        }
    }
    phonemize_atoms(atoms, language, false);
    return to_utf8(joined(atoms, atoms.size()));
}

std::vector<voxd_kokoro_piece> voxd_kokoro_phonemizer::chunks(const std::string & text, const std::string & lang_code) const {
    const kokoro_language & language   = language_of(lang_code);
    const std::vector<text_char> chars = decode_utf8(text);
    check_text(text, chars, language);
    std::vector<voxd_kokoro_piece> pieces;
    // the first `count` atoms of `pending` become a piece
    const auto emit = [&](std::vector<atom> & pending, size_t count) {
        const std::u32string phonemes = joined(pending, count);
        if (!phonemes.empty()) {
            pieces.push_back({ to_utf8(phonemes), pending.front().text_begin, pending[count - 1].text_end });
        }
        pending.erase(pending.begin(), pending.begin() + (std::ptrdiff_t) count);
    };
    for (const std::vector<text_char> & line : lines_of(chars)) {
        std::vector<atom> atoms = atoms_of(line);
        phonemize_atoms(atoms, language, true);
        std::vector<atom> pending;
        for (atom & a : atoms) {
            pending.push_back(std::move(a));
            while (pending.size() > 1 && joined(pending, pending.size()).size() > max_phonemes) {
                // cut after the best boundary before the newest atom: the last sentence end, else the last `:;`, else
                // the last `,—`, else right before it
                size_t cut = pending.size() - 2;
                for (size_t i = pending.size() - 1; i-- > 0;) {
                    if (pending[i].after > pending[cut].after) {
                        cut = i;
                    }
                }
                emit(pending, cut + 1);
            }
        }
        if (!pending.empty()) {
            emit(pending, pending.size());
        }
    }
    return pieces;
}

std::vector<int32_t> voxd_kokoro_token_ids(const std::string & phonemes) {
    std::vector<int32_t> ids;
    for (const text_char & c : decode_utf8(phonemes)) {
        const int32_t id = token_id(c.cp);
        if (id >= 0) {
            ids.push_back(id);
        }
    }
    return ids;
}

#if !defined(VOXD_STATIC_CLIBS)
// A source build links Debian's libespeak-ng.a, which is built with pcaudiolib (playback) and sonic (speed-up): voxd
// never plays audio through espeak-ng nor speeds it up (its synthesizer runs only on empty text), so these stand in
// for both libraries, failing if ever reached, instead of bringing PulseAudio and ALSA into the addon. A platform
// package builds espeak-ng without them (scripts/bundled-deps.mjs).
extern "C" {
struct audio_object;
struct sonicStreamStruct;

struct audio_object * create_audio_device_object(const char *, const char *, const char *) {
    return nullptr;
}
int audio_object_open(struct audio_object *, int, uint32_t, uint8_t) {
    return -1;
}
void audio_object_close(struct audio_object *) {}
void audio_object_destroy(struct audio_object *) {}
int audio_object_write(struct audio_object *, const void *, size_t) {
    return -1;
}
int audio_object_drain(struct audio_object *) {
    return -1;
}
int audio_object_flush(struct audio_object *) {
    return -1;
}
const char * audio_object_strerror(struct audio_object *, int) {
    return "voxd's espeak-ng plays no audio";
}

struct sonicStreamStruct * sonicCreateStream(int, int) {
    return nullptr;
}
void sonicDestroyStream(struct sonicStreamStruct *) {}
int sonicWriteShortToStream(struct sonicStreamStruct *, short *, int) {
    return 0;
}
int sonicReadShortFromStream(struct sonicStreamStruct *, short *, int) {
    return 0;
}
int sonicFlushStream(struct sonicStreamStruct *) {
    return 0;
}
float sonicGetSpeed(struct sonicStreamStruct *) {
    return 1.0f;
}
void sonicSetSpeed(struct sonicStreamStruct *, float) {}
}
#endif
