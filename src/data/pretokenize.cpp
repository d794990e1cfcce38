#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/pretokenize.h"

#include <pcre2.h>

namespace elastrain {

size_t ValidUtf8Prefix(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF;  // the range of the second byte
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) len = 3, lo = 0xA0;
    else if (c >= 0xE1 && c <= 0xEC) len = 3;
    else if (c == 0xED) len = 3, hi = 0x9F;  // no surrogates
    else if (c >= 0xEE && c <= 0xEF) len = 3;
    else if (c == 0xF0) len = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) len = 4, hi = 0x8F;  // nothing above U+10FFFF
    else return i;
    if (i + len > n || p[i + 1] < lo || p[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k)
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return i;
    i += len;
  }
  return n;
}

struct PreTokenizer::Impl {
  pcre2_code* code = nullptr;
  ~Impl() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

namespace {

// Unicode's White_Space property (PropList.txt; stable since Unicode 6.3). PCRE2 10.42's \s
// under UCP also matches U+180E MONGOLIAN VOWEL SEPARATOR, which left White_Space in
// Unicode 6.3; Python's regex module and the Rust regex crate (tiktoken) follow the
// property, so the patterns spell it out.
constexpr std::string_view kWhiteSpace = R"(\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// `pattern` with \s and \S replaced by the White_Space class (inside a [...] class, its
// members). The built-in patterns have no nested classes and no escaped backslashes.
std::string WithWhiteSpaceClass(std::string_view pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[i + 1];
      if (e == 's' || e == 'S') {
        if (in_class && e == 's') out += kWhiteSpace;
        else if (in_class) out += "\\S";  // not in the built-in patterns; left to PCRE2
        else out += (e == 's' ? "[" : "[^") + std::string(kWhiteSpace) + "]";
      } else {
        out += c;
        out += e;
      }
      ++i;
      continue;
    }
    if (c == '[' && !in_class) in_class = true;
    else if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

}  // namespace

Result<PreTokenizer> PreTokenizer::Compile(std::string_view pattern_in) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  auto impl = std::make_unique<Impl>();
  const std::string pattern = WithWhiteSpaceClass(pattern_in);
  impl->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                             &err, &err_offset, nullptr);
  if (impl->code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    return Status::InvalidArgument("pre-tokenization pattern does not compile at offset " +
                                   std::to_string(err_offset) + ": " + reinterpret_cast<char*>(msg));
  }
  // JIT when the platform has it (several times faster); the interpreter otherwise.
  (void)pcre2_jit_compile(impl->code, PCRE2_JIT_COMPLETE);
  return PreTokenizer(std::move(impl));
}

Result<std::vector<std::string_view>> PreTokenizer::Split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  ELASTRAIN_RETURN_IF_ERROR(Split(text, [&](std::string_view p) { pieces.push_back(p); }));
  return pieces;
}

Status PreTokenizer::Split(std::string_view text, const std::function<void(std::string_view)>& emit) const {
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  if (md == nullptr) return Status::OutOfMemory("pre-tokenization: no memory for PCRE2 match data");
  Status status;
  size_t pos = 0;
  while (pos < text.size() && status.ok()) {
    const size_t valid = ValidUtf8Prefix(text.substr(pos));
    // The valid run is matched on its own, so the regex never sees invalid UTF-8 (what
    // PCRE2_NO_UTF_CHECK requires) and lookaheads stop at its end.
    const std::string_view run = text.substr(pos, valid);
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(run.data());
    size_t at = 0;
    while (at < run.size()) {
      const int rc = pcre2_match(impl_->code, subject, run.size(), at, PCRE2_NO_UTF_CHECK, md, nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) {
        emit(run.substr(at));
        break;
      }
      if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof(msg));
        status = Status::Internal("pre-tokenization failed at byte " + std::to_string(pos + at) + ": " +
                                  reinterpret_cast<char*>(msg));
        break;
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      size_t begin = ov[0], end = ov[1];
      if (begin > at) emit(run.substr(at, begin - at));  // text the pattern skipped
      if (end == begin) {  // an empty match (none of the built-in patterns has one): one character
        end = begin + 1;
        while (end < run.size() && (static_cast<unsigned char>(run[end]) & 0xC0) == 0x80) ++end;
      }
      emit(run.substr(begin, end - begin));
      at = end;
    }
    pos += valid;
    if (pos < text.size()) {  // one invalid byte, a piece of its own
      emit(text.substr(pos, 1));
      ++pos;
    }
  }
  pcre2_match_data_free(md);
  return status;
}

}  // namespace elastrain
