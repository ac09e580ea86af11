// Kokoro's text frontend (tts/kokoro/phonemizer.h) over the espeak-ng the build links and its data (Debian's, or a
// platform package's own). The expected strings are espeak-ng 1.51's IPA through Kokoro's mappings; the English
// ones are misaki's own examples (its EN_PHONES.md and dictionaries) where espeak-ng agrees with them.
#include "harness.h"

#include "tts/kokoro/phonemizer.h"

#include <sys/stat.h>
#include <unistd.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <cstdio>
#include <cstdlib>
#include <thread>

namespace {

const voxd_kokoro_phonemizer & phonemizer() {
    static const voxd_kokoro_phonemizer p(""); // espeak-ng's own data directory
    return p;
}

std::string ps(const std::string & text, const std::string & lang) {
    return phonemizer().phonemize(text, lang);
}

size_t code_points(const std::string & s) {
    size_t n = 0;
    for (unsigned char c : s) {
        n += (c & 0xC0) != 0x80 ? 1 : 0;
    }
    return n;
}

// The code point that ends `s`, as UTF-8.
std::string last_char(const std::string & s) {
    size_t at = s.size();
    while (at > 0 && ((unsigned char) s[at - 1] & 0xC0) == 0x80) {
        at--;
    }
    return at > 0 ? s.substr(at - 1) : "";
}

// Sentences of varied length (about 3000 characters in all): no sentence alone fills a piece.
std::string long_text() {
    const char * sentences[] = {
        "The committee met on Tuesday to discuss the budget, the schedule and the new building.",
        "Nobody expected the results; they were, to put it mildly, surprising!",
        "Why would anyone walk that far in the rain?",
        "She smiled: the long journey was finally over.",
        "Three hundred and twelve people signed the letter before noon.",
    };
    std::string text;
    for (size_t i = 0; text.size() < 3000; i = (i * 7 + 3) % 5) {
        text += (text.empty() ? "" : " ") + std::string(sentences[i]);
    }
    return text;
}

} // namespace

VOXD_TEST("kokoro-phonemizer: American English speaks misaki's examples in Kokoro's alphabet") {
    // EN_PHONES.md's examples, word for word
    CHECK_EQ(ps("jump chump hey high how soy boxes pixel ash sun thin Asia yes sung", "a"),
             std::string("ʤˈʌmp ʧˈʌmp hˈA hˈI hˌW sˈY bˈɑksᵻz pˈɪksᵊl ˈæʃ sˈʌn θˈɪn ˈAʒə jˈɛs sˈʌŋ"));
    // us_gold: hello həlˈO, world wˈɜɹld, water wˈɔɾəɹ and little lˈɪɾᵊl with Kokoro v1.0's T for ɾ
    CHECK_EQ(ps("Hello, world!", "a"), std::string("həlˈO, wˈɜɹld!"));
    CHECK_EQ(ps("water little", "a"), std::string("wˈɔTəɹ lˈɪTᵊl"));
    // espeak-ng's syllabic n (ʔn̩) and glottal stop (ʔ -> t): us_gold's bˈʌʔn, the same after Kokoro's mapping
    CHECK_EQ(ps("button", "a"), std::string("bˈʌtn"));
    CHECK_EQ(ps("en-us", "a"), ps("en-us", "en-us"));
}

VOXD_TEST("kokoro-phonemizer: a word outside misaki's dictionaries is espeak-ng's (Kokoro: kəkˈɔɹO, not the README's kˈOkəɹO)") {
    // espeak-ng 1.51 says kəkˈoːɹo͡ʊ: o͡ʊ -> O, ː dropped (American), o -> ɔ (espeak-ng before 1.52)
    CHECK_EQ(ps("Kokoro", "a"), std::string("kəkˈɔɹO"));
}

VOXD_TEST("kokoro-phonemizer: British English keeps ː and says Q") {
    // gb_gold: hello həlˈQ, world wˈɜːld, water wˈɔːtə, little lˈɪtᵊl, believe bɪlˈiːv
    CHECK_EQ(ps("Hello, world!", "b"), std::string("həlˈQ, wˈɜːld!"));
    CHECK_EQ(ps("water little believe", "b"), std::string("wˈɔːtə lˈɪtᵊl bɪlˈiːv"));
    // gb_gold has bˈʌtᵊn; espeak-ng's en-gb has no syllabic n here
    CHECK_EQ(ps("button", "b"), std::string("bˈʌtən"));
    CHECK_EQ(ps("Kokoro", "en-gb"), std::string("kəkˈɔːɹQ"));
}

VOXD_TEST("kokoro-phonemizer: the other languages: espeak-ng's voice, ties merged into Kokoro's letters") {
    CHECK_EQ(ps("¿Dónde está la biblioteca? Está cerca de la plaza.", "e"), std::string("dˈonde estˈa la βˌiβliotˈeka? estˈa θˈeɾka ðe la plˈaθa."));
    // espeak-ng's "ʒə-": its hyphen goes
    CHECK_EQ(ps("Bonjour, je m'appelle Marie. Où est la gare ?", "f"), std::string("bɔ̃ʒˈuʁ, ʒə mapˈɛl maʁˈi. u ɛ la ɡˈaʁ ?"));
    CHECK_EQ(ps("नमस्ते, आप कैसे हैं?", "h"), std::string("nəmˈʌsteː, ˌaːp kˈɛːseː hɛ̃?"));
    // t͡ʃ -> ʧ, t͡s -> ʦ, d͡z -> ʣ
    CHECK_EQ(ps("Ciao, come stai? Sto bene, grazie.", "i"), std::string("ʧˈao, kˌome stˈaj? stˈɔ bˈɛne, ɡrˈaʦje."));
    CHECK_EQ(ps("Pizza, zucchero e gnocchi.", "it"), std::string("pˈiʦːa, ʣˈukːeɾo e ɲˈokːɪ."));
    // e͡ɪ -> A, d͡ʒ -> ʤ, ɐ̃͡ʊ̃ -> ɐ̃ʊ̃
    CHECK_EQ(ps("Olá, tudo bem? Eu gosto de pão.", "p"), std::string("olˈa, tˈudʊ bˈAŋ? eʊ ɡˈɔstʊ ʤy pˈɐ̃ʊ̃."));
}

VOXD_TEST("kokoro-phonemizer: Hindi's Latin words and symbols are read by the English voice, as espeak-ng's Hindi switches to it") {
    CHECK_EQ(ps("नमस्ते hello world, आप कैसे हैं? 25 रुपये @ 10%", "h"), std::string("nəmˈʌsteː həlˈQ wˈɜːld, ˌaːp kˈɛːseː hɛ̃? pˈʌcːis ɾˈʊpjˌeː ˈat dˈʌs pəsˈɛnt"));
}

VOXD_TEST("kokoro-phonemizer: letters of a script the language does not read are invalid_argument naming them") {
    for (const auto & [text, lang] : { std::pair<const char *, const char *>{ "5'Oु", "a" },
                                       { "β'γ", "e" },
                                       { "Москва", "b" },
                                       { "東京", "a" },
                                       { "नमस्ते", "f" },
                                       { "한국", "h" },
                                       { "שלום", "p" },
                                       { "Ω", "i" } }) {
        CHECK_THROWS_CODE(ps(text, lang), "invalid_argument");
        CHECK_THROWS_CODE(phonemizer().chunks(text, lang), "invalid_argument");
    }
    try {
        ps("the Greek β", "a");
        VOXD_FAIL("β was phonemized");
    } catch (const voxd_error & e) {
        CHECK(std::string(e.what()).find("U+03B2 \"β\" at byte 10") != std::string::npos);
    }
    // Latin letters of every kind, digits, symbols and emoji are read
    CHECK(!ps("Ærøskøbing, naïve café, Łódź, ǅ, ﬁ 3½ € ☕ 😀", "a").empty());
}

// Each of these made espeak-ng 1.51 read freed memory, overflow a buffer or crash (AddressSanitizer, with
// `npm run test:native -- --sanitize`): they are read, or refused, without reaching that code.
VOXD_TEST("kokoro-phonemizer: text that broke espeak-ng 1.51 is read or refused safely") {
    for (const char * hindi : { "कौ-*@'", "ौ-*@'", "œd-%úç", "े=$f$", "क'O", "ृ'o", " ्+2आ&#मृे_@ूॉू'प'ातॉ (ा=&्ृत+#9तत" }) {
        (void) ps(hindi, "h");
        (void) phonemizer().chunks(hindi, "h");
    }
    CHECK_THROWS_CODE(ps("म'म", "a"), "invalid_argument");
    CHECK_THROWS_CODE(ps("qं-ं", "a"), "invalid_argument");
    // "s's's'...": a word of stacked suffixes overflowed espeak-ng's phoneme buffer from 136 bytes on
    std::string suffixes;
    for (int i = 0; i < 70; i++) {
        suffixes += "s'";
    }
    CHECK_THROWS_CODE(ps(suffixes, "a"), "invalid_argument");
    CHECK(!ps(suffixes.substr(0, voxd_kokoro_phonemizer::max_word_bytes), "a").empty());
}

// Every voice change queues a copy of the voice (1.3 kB) that espeak-ng frees only when it synthesizes.
VOXD_TEST("kokoro-phonemizer: switching languages back and forth keeps nothing of each switch") {
    const std::string english        = ps("Good morning.", "a");
    const auto switch_back_and_forth = [&] {
        for (int i = 0; i < 300; i++) {
            CHECK_EQ(ps("Good morning.", "a"), english);
            CHECK(!ps("Bonjour.", "f").empty());
        }
    };
    switch_back_and_forth();
#if defined(__GLIBC__)
    // glibc's count of bytes in use (0 under AddressSanitizer, whose allocator it does not see)
    const size_t before = mallinfo2().uordblks;
    switch_back_and_forth();
    const size_t after = mallinfo2().uordblks;
    CHECK(after < before + 100 * 1024); // 600 switches would keep some 800 kB
#endif
}

VOXD_TEST("kokoro-phonemizer: punctuation comes back where the text had it; marks outside Kokoro's vocabulary go") {
    // « » become Kokoro's curly quotes; ( ) " — stay
    CHECK_EQ(ps("\"Hello,\" she said (quietly) — «really»?", "a"), std::string("\"həlˈO,\" ʃi sˈɛd (kwˈIətli) — “ɹˈiəli”?"));
    CHECK_EQ(ps("Wait... what?! Yes; no: maybe…", "a"), std::string("wˈAt... wˌʌt?! jˈɛs; nˈO: mˈAbi…"));
    // ¿ ¡ [ ] { } are not in the vocabulary
    CHECK_EQ(ps("¡Hola! [sí] {no}", "e"), std::string("ˈola! sˈi nˈo"));
    // espeak-ng's language switches ("(en)...(fr)") are not punctuation: the flags go, the word stays
    CHECK_EQ(ps("Hello world", "f"), std::string("ɛlˈo wˈɜːld"));
}

VOXD_TEST("kokoro-phonemizer: j, z and unknown languages are invalid_argument naming the language") {
    for (const char * code : { "j", "z", "ja", "zh", "x", "", "A", "en" }) {
        CHECK_THROWS_CODE(ps("hello", code), "invalid_argument");
        CHECK_THROWS_CODE(phonemizer().chunks("hello", code), "invalid_argument");
    }
    try {
        ps("hello", "j");
        VOXD_FAIL("j was phonemized");
    } catch (const voxd_error & e) {
        CHECK(std::string(e.what()).find("Japanese") != std::string::npos);
        CHECK(std::string(e.what()).find("espeak-ng") != std::string::npos);
    }
    try {
        ps("hello", "q");
        VOXD_FAIL("q was phonemized");
    } catch (const voxd_error & e) {
        CHECK(std::string(e.what()).find("'q'") != std::string::npos);
        CHECK(std::string(e.what()).find("a (American English)") != std::string::npos);
    }
}

VOXD_TEST("kokoro-phonemizer: a long text is cut into pieces of at most 510 phonemes at sentence ends") {
    const std::string text = long_text();
    CHECK(text.size() >= 3000);
    const std::vector<voxd_kokoro_piece> pieces = phonemizer().chunks(text, "a");
    CHECK(pieces.size() >= 5);
    std::string all;
    size_t previous_end = 0;
    for (const voxd_kokoro_piece & piece : pieces) {
        CHECK(code_points(piece.phonemes) <= voxd_kokoro_phonemizer::max_phonemes);
        CHECK(&piece == &pieces.back() || code_points(piece.phonemes) > 400); // filled with sentences, not one each
        const std::string end = last_char(piece.phonemes);
        CHECK(end == "." || end == "!" || end == "?");
        CHECK(piece.text_begin >= previous_end && piece.text_begin < piece.text_end && piece.text_end <= text.size());
        const char last = text[piece.text_end - 1];
        CHECK(last == '.' || last == '!' || last == '?');
        previous_end = piece.text_end;
        all += (all.empty() ? "" : " ") + piece.phonemes;
    }
    CHECK_EQ(pieces.front().text_begin, (size_t) 0);
    CHECK_EQ(pieces.back().text_end, text.size());
    // espeak-ng reads between the marks, so cuts there change nothing
    CHECK_EQ(all, ps(text, "a"));
}

VOXD_TEST("kokoro-phonemizer: a sentence too long for one piece is cut at ; or :, else at , or —") {
    std::string clauses, phrases;
    for (int i = 0; i < 14; i++) {
        clauses += "the river ran quickly past the old mill and the quiet village, under the bridge; ";
        phrases += "the river ran quickly past the old mill and the quiet village — under the bridge, ";
    }
    clauses += "and then it reached the sea.";
    phrases += "and then it reached the sea.";
    for (const auto & [text, mark] : { std::pair<std::string, std::string>{ clauses, ";" }, { phrases, "," } }) {
        const std::vector<voxd_kokoro_piece> pieces = phonemizer().chunks(text, "b");
        CHECK(pieces.size() >= 2);
        for (size_t i = 0; i < pieces.size(); i++) {
            CHECK(code_points(pieces[i].phonemes) <= voxd_kokoro_phonemizer::max_phonemes);
            CHECK_EQ(last_char(pieces[i].phonemes), i + 1 < pieces.size() ? mark : std::string("."));
            CHECK_EQ(text.substr(pieces[i].text_end - 1, 1), i + 1 < pieces.size() ? mark : std::string("."));
        }
    }
}

VOXD_TEST("kokoro-phonemizer: words without punctuation are cut between words, never inside one") {
    std::string text;
    for (int i = 0; i < 200; i++) {
        text += i % 2 ? "morning " : "yesterday ";
    }
    const std::vector<voxd_kokoro_piece> pieces = phonemizer().chunks(text, "a");
    CHECK(pieces.size() >= 3);
    for (const voxd_kokoro_piece & piece : pieces) {
        CHECK(code_points(piece.phonemes) <= voxd_kokoro_phonemizer::max_phonemes);
        CHECK(piece.text_begin == 0 || text[piece.text_begin - 1] == ' ');
        CHECK(piece.text_end == text.size() || text[piece.text_end] == ' ');
        const std::string spoken = text.substr(piece.text_begin, piece.text_end - piece.text_begin);
        CHECK_EQ(piece.phonemes, ps(spoken, "a").substr(0, piece.phonemes.size())); // the same words, read one by one
    }
    CHECK_EQ(pieces.back().text_end, text.size() - 1); // the trailing space is not spoken
}

VOXD_TEST("kokoro-phonemizer: a line break ends a piece; empty and blank text give nothing") {
    const std::vector<voxd_kokoro_piece> pieces = phonemizer().chunks("Hello there.\r\n\nGood morning", "a");
    CHECK_EQ(pieces.size(), (size_t) 2);
    CHECK_EQ(pieces[0].phonemes, std::string("həlˈO ðˈɛɹ."));
    CHECK_EQ(pieces[1].phonemes, std::string("ɡˈʊd mˈɔɹnɪŋ"));
    CHECK_EQ(pieces[1].text_begin, (size_t) 15);
    CHECK_EQ(pieces[1].text_end, (size_t) 27);
    CHECK_EQ(ps("Hello there.\nGood morning", "a"), std::string("həlˈO ðˈɛɹ. ɡˈʊd mˈɔɹnɪŋ"));
    CHECK_EQ(ps("", "a"), std::string());
    CHECK_EQ(ps(" \t\n\r  ", "e"), std::string());
    CHECK(phonemizer().chunks("", "a").empty());
    CHECK(phonemizer().chunks("  \n\t \n", "f").empty());
    CHECK(phonemizer().chunks("[ ] { }", "a").empty()); // nothing in Kokoro's vocabulary
}

VOXD_TEST("kokoro-phonemizer: control characters read as spaces; a NUL does not end the text") {
    CHECK_EQ(ps("bell\a tab\there\x01\x7f end", "a"), std::string("bˈɛl tˈæb hˈɪɹ ˈɛnd"));
    CHECK_EQ(ps(std::string("one\0two", 7), "a"), std::string("wˈʌn tˈu"));
    CHECK_EQ(ps("one\xc2\x85two\xc2\xa0three", "a"), std::string("wˈʌn tˈu θɹˈi")); // NEL, no-break space
}

VOXD_TEST("kokoro-phonemizer: text that is not UTF-8 is invalid_argument") {
    for (const std::string & bad : { std::string("bad \xff utf"), std::string("\xc3"), std::string("over\xc0\xaflong"), std::string("surrogate \xed\xa0\x80"),
                                     std::string("beyond \xf4\x90\x80\x80"), std::string("cut \xe2\x82") }) {
        CHECK_THROWS_CODE(ps(bad, "a"), "invalid_argument");
        CHECK_THROWS_CODE(phonemizer().chunks(bad, "e"), "invalid_argument");
    }
    CHECK_THROWS_CODE(voxd_kokoro_token_ids("\xff"), "invalid_argument");
}

VOXD_TEST("kokoro-phonemizer: a word espeak-ng would cut short, or too long for one piece, is invalid_argument") {
    CHECK_THROWS_CODE(ps(std::string(3000, 'a'), "a"), "invalid_argument");
    CHECK_THROWS_CODE(phonemizer().chunks("A very " + std::string(200, 'x') + " long word.", "a"), "invalid_argument");
    // at the limit it is read; symbols between letters end a word
    CHECK(!ps(std::string(voxd_kokoro_phonemizer::max_word_bytes, 'b'), "a").empty());
    std::string path;
    for (int i = 0; i < 40; i++) {
        path += "/folder";
    }
    CHECK(!ps(path, "a").empty());
    // punctuation alone beyond a piece: refused by chunks(), kept whole by phonemize()
    CHECK_THROWS_CODE(phonemizer().chunks(std::string(600, '!'), "a"), "invalid_argument");
    CHECK_EQ(ps(std::string(600, '!'), "a"), std::string(600, '!'));
}

VOXD_TEST("kokoro-phonemizer: many threads at once get what one thread gets") {
    const std::string text    = long_text();
    const std::string english = ps(text, "a");
    const std::string french  = ps("Bonjour, je m'appelle Marie. Où est la gare ?", "f");
    const size_t pieces       = phonemizer().chunks(text, "b").size();
    std::atomic<int> wrong{ 0 };
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; t++) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < 15; i++) {
                try {
                    if ((t + i) % 3 == 0) {
                        wrong += phonemizer().phonemize(text, "a") == english ? 0 : 1;
                    } else if ((t + i) % 3 == 1) {
                        wrong += voxd_kokoro_phonemizer("").phonemize("Bonjour, je m'appelle Marie. Où est la gare ?", "fr-fr") == french ? 0 : 1;
                    } else {
                        wrong += phonemizer().chunks(text, "b").size() == pieces ? 0 : 1;
                    }
                } catch (...) {
                    wrong++;
                }
            }
        });
    }
    for (std::thread & t : threads) {
        t.join();
    }
    CHECK_EQ(wrong.load(), 0);
}

VOXD_TEST("kokoro-phonemizer: espeak-ng's data directory: a missing one is engine_unavailable, another one model_load_failed") {
    (void) phonemizer();
    CHECK(phonemizer().espeak_version().rfind("1.", 0) == 0);
    CHECK(!phonemizer().data_dir().empty());
    CHECK_THROWS_CODE(voxd_kokoro_phonemizer("/nonexistent/espeak-ng-data"), "engine_unavailable");
    // the directory in use, named as espeak-ng names it, is the same one
    CHECK_EQ(voxd_kokoro_phonemizer(phonemizer().data_dir()).espeak_version(), phonemizer().espeak_version());
    char dir[] = "/tmp/voxd-espeak-XXXXXX";
    CHECK(mkdtemp(dir) != nullptr);
    const std::string phontab = std::string(dir) + "/phontab";
    std::fclose(std::fopen(phontab.c_str(), "w"));
    CHECK_THROWS_CODE(voxd_kokoro_phonemizer(dir), "model_load_failed");
    std::remove(phontab.c_str());
    rmdir(dir);
}

VOXD_TEST("kokoro-phonemizer: token ids are config.json's vocab") {
    const std::vector<int32_t> ids = voxd_kokoro_token_ids("həlˈO, wˈɜɹld!");
    CHECK_EQ(ids.size(), (size_t) 14);
    const int32_t expected[] = { 50, 83, 54, 156, 31, 3, 16, 65, 156, 87, 123, 54, 46, 5 };
    for (size_t i = 0; i < ids.size(); i++) {
        CHECK_EQ(ids[i], expected[i]);
    }
    CHECK(voxd_kokoro_token_ids("¿#").empty());
}
