// TextStream (model.h): the text of a growing hypothesis, in pieces that
// never change once given out.
#include "halformer/model.h"
#include "halformer/tokenizer.h"
#include "text/clean_up.h"

#include <algorithm>

namespace halformer {

namespace {

// The length of `text` without its unstable end: an incomplete UTF-8
// sequence, then any U+FFFD (a byte-level decoder's placeholder for bytes
// the next token may complete) and whitespace (a SentencePiece "▁" the next
// piece may join).
size_t stable_length(const std::string &text) {
    size_t n = text.size();
    // At most 3 bytes of a character whose lead byte says it is longer.
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        const unsigned char c = (unsigned char)text[n - back];
        if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
        const size_t want = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        if (want > back) n -= back;
        break;
    }
    for (;;) {
        if (n >= 3 && text.compare(n - 3, 3, "\xEF\xBF\xBD") == 0) {
            n -= 3;
        } else if (n >= 1 && (text[n - 1] == ' ' || text[n - 1] == '\n' || text[n - 1] == '\t' || text[n - 1] == '\r')) {
            n -= 1;
        } else {
            return n;
        }
    }
}

}  // namespace

TextStream::TextStream(const Model &model, const Sequence *prompt, std::vector<std::string> stop)
    : model_(model), prompt_(prompt), stop_(std::move(stop)) {}

// Gives out text[sent, end) if text still begins with what was given out.
std::string TextStream::advance(const std::string &text, size_t end) {
    if (end <= sent_.size() || text.compare(0, sent_.size(), sent_) != 0) return "";
    std::string piece = text.substr(sent_.size(), end - sent_.size());
    sent_ += piece;
    return piece;
}

std::string TextStream::push(int32_t token) {
    if (stopped_) return "";
    tokens_.push_back(token);
    const std::string text = model_.text_of(tokens_, prompt_);
    // The first stop string to appear ends the text.
    size_t first = std::string::npos;
    for (const std::string &s : stop_) first = std::min(first, text.find(s));
    if (first != std::string::npos) {
        stopped_ = true;
        return advance(text, first);
    }
    size_t n = stable_length(text);
    // An end the clean-up of spaces may yet change (" n" before "'t").
    if (model_.tokenizer().clean_up_tokenization_spaces()) n -= text::clean_up_pending(text.substr(0, n));
    // An end that a stop string begins with may yet become that stop string.
    size_t hold = 0;
    for (const std::string &s : stop_) {
        for (size_t k = std::min(s.size() - 1, n); k > hold; k--) {
            if (text.compare(n - k, k, s, 0, k) == 0) {
                hold = k;
                break;
            }
        }
    }
    return advance(text, n - hold);
}

std::string TextStream::finish() {
    if (stopped_) return "";
    const std::string text = model_.text_of(tokens_, prompt_);
    return advance(text, text.size());
}

}  // namespace halformer
