// GPT-2's byte-level BPE (vocab.json + merges.txt) and tiktoken's BPE (Llama 3): readers
// that refuse hostile files with the file, line and what was expected, and the encoders.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <filesystem>
#include <unordered_map>

#include "common/files.h"
#include "data/bpe_merge.h"
#include "data/pretokenize.h"
#include "data/tokenizer.h"

namespace elastrain {

namespace {

// Larger than any published vocabulary (GPT-2's vocab.json is 1 MB, Llama 3's
// tokenizer.model 2 MB); a bigger file is refused before it is read.
constexpr uint64_t kMaxFileBytes = uint64_t{64} << 20;
// A merges.txt or tiktoken line: two tokens or a base64 token and a rank.
constexpr size_t kMaxLineBytes = 4096;

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

// A short, printable rendering of hostile text for an error message.
std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < 80; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > 80) out += "...";
  return out + "\"";
}

Result<std::string> ReadSmallFile(const std::string& path, std::string_view what) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return Status::NotFound(path + ": cannot read the " + std::string(what) + " (" + ec.message() + ")");
  if (size > kMaxFileBytes)
    return Status::InvalidArgument(path + ": " + std::to_string(size) + " bytes: expected a " + std::string(what) +
                                   " of at most " + std::to_string(kMaxFileBytes) + " bytes");
  return ReadFile(path);
}

// The lines of a text file, numbered from 1, without their "\n" or a "\r" before it; empty
// lines at the end of the file are dropped. Fails on a line over kMaxLineBytes.
Result<std::vector<std::string_view>> Lines(std::string_view text, const std::string& name, std::string_view expected) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > kMaxLineBytes)
      return Status::InvalidArgument(name + ": line " + std::to_string(lines.size() + 1) + " is " +
                                     std::to_string(line.size()) + " bytes long: expected " + std::string(expected) +
                                     " in at most " + std::to_string(kMaxLineBytes) + " bytes");
    lines.push_back(line);
    pos = nl + 1;
  }
  return lines;
}

Status LineError(const std::string& name, size_t line, const std::string& what) {
  return Status::InvalidArgument(name + ": line " + std::to_string(line) + ": " + what);
}

std::string HexByte(int b) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "0x%02x", b);
  return buf;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// The code points of valid UTF-8 `s` (the caller checked it).
std::vector<char32_t> CodePoints(std::string_view s) {
  std::vector<char32_t> cps;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    cps.push_back(cp);
    i += len;
  }
  return cps;
}

// GPT-2's bytes_to_unicode (openai/gpt-2 src/encoder.py): the printable Latin-1 bytes
// stand for themselves; the other 68 bytes, in order, for U+0100 onwards.
struct ByteAlphabet {
  std::array<char32_t, 256> char_of_byte{};
  std::array<int, 324> byte_of_char{};  // -1: not in the alphabet (every char is < 256 + 68)
  ByteAlphabet() {
    byte_of_char.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      char_of_byte[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
      byte_of_char[char_of_byte[b]] = b;
    }
  }
  // The bytes a token string stands for; nullopt when a character is outside the alphabet.
  std::optional<std::string> Bytes(std::string_view token) const {
    std::string out;
    for (char32_t cp : CodePoints(token)) {
      if (cp >= byte_of_char.size() || byte_of_char[cp] < 0) return std::nullopt;
      out.push_back(static_cast<char>(byte_of_char[cp]));
    }
    return out;
  }
};
const ByteAlphabet& Alphabet() {
  static const ByteAlphabet a;
  return a;
}

// Strict standard base64 (RFC 4648 section 4): length a multiple of 4, '=' only as the
// final one or two characters.
std::optional<std::string> DecodeBase64(std::string_view s) {
  if (s.empty() || s.size() % 4 != 0) return std::nullopt;
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  size_t pad = 0;
  if (s.back() == '=') pad = s[s.size() - 2] == '=' ? 2 : 1;
  std::string out;
  out.reserve(s.size() / 4 * 3);
  for (size_t i = 0; i < s.size(); i += 4) {
    uint32_t v = 0;
    const bool last = i + 4 == s.size();
    for (size_t k = 0; k < 4; ++k) {
      const bool padded = last && k >= 4 - pad;
      const int d = padded ? 0 : value(s[i + k]);
      if (d < 0) return std::nullopt;
      v = (v << 6) | static_cast<uint32_t>(d);
    }
    out.push_back(static_cast<char>(v >> 16));
    if (!(last && pad == 2)) out.push_back(static_cast<char>((v >> 8) & 0xFF));
    if (!(last && pad >= 1)) out.push_back(static_cast<char>(v & 0xFF));
  }
  return out;
}

// Meta's tokenizer.py (llama-models, Llama 3.1 onwards; Llama 3's ids 128000, 128001,
// 128006, 128007 and 128009 are the same): 11 named specials, then reserved ones.
std::vector<std::string> Llama3SpecialTokens() {
  std::vector<std::string> names = {"<|begin_of_text|>",     "<|end_of_text|>",        "<|reserved_special_token_0|>",
                                    "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|step_id|>",
                                    "<|start_header_id|>",   "<|end_header_id|>",      "<|eom_id|>",
                                    "<|eot_id|>",            "<|python_tag|>"};
  for (int i = 2; names.size() < static_cast<size_t>(TiktokenTokenizer::kNumSpecialTokens); ++i)
    names.push_back("<|reserved_special_token_" + std::to_string(i) + "|>");
  return names;
}

uint64_t PairKey(int32_t a, int32_t b) { return (uint64_t{static_cast<uint32_t>(a)} << 32) | static_cast<uint32_t>(b); }

// Pre-tokenizes `text` and encodes each piece with encode_piece, through the thread's cache.
template <typename EncodePiece>
Result<std::vector<int32_t>> EncodePieces(const PreTokenizer& pre, uint64_t serial, const std::string& text,
                                          EncodePiece encode_piece) {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 2 + 16);  // English runs at about 0.25 to 0.45 ids per byte
  bpe::Scratch scratch;
  Status st = pre.Split(text, [&](std::string_view piece) {
    if (const std::vector<int32_t>* hit = bpe::PieceCache::Find(serial, piece)) {
      ids.insert(ids.end(), hit->begin(), hit->end());
      return;
    }
    const size_t before = ids.size();
    encode_piece(piece, &scratch, &ids);
    bpe::PieceCache::Put(serial, piece, ids.data() + before, ids.size() - before);
  });
  if (!st.ok()) return st;
  return ids;
}

std::string DecodeWith(const std::vector<std::string>& bytes_of_id, const std::vector<int32_t>& ids) {
  std::string text;
  for (int32_t id : ids)
    if (id >= 0 && static_cast<size_t>(id) < bytes_of_id.size()) text += bytes_of_id[id];
  return text;
}

std::optional<int32_t> FindSpecial(const StringMap<int32_t>& specials, std::string_view name) {
  auto it = specials.find(name);
  if (it == specials.end()) return std::nullopt;
  return it->second;
}

}  // namespace

// ---------------------------------------------------------------- GPT-2 byte-level BPE

struct Gpt2BpeTokenizer::Impl {
  PreTokenizer pre;
  std::array<int32_t, 256> byte_id{};
  std::unordered_map<uint64_t, bpe::Merge> merges;  // PairKey(left id, right id)
  std::vector<std::string> bytes_of_id;
  StringMap<int32_t> specials;
  uint64_t serial = bpe::PieceCache::NewSerial();
  explicit Impl(PreTokenizer p) : pre(std::move(p)) {}
};

Gpt2BpeTokenizer::Gpt2BpeTokenizer(std::unique_ptr<Impl> impl, std::string id)
    : impl_(std::move(impl)), id_(std::move(id)) {}
Gpt2BpeTokenizer::~Gpt2BpeTokenizer() = default;

Result<std::unique_ptr<Gpt2BpeTokenizer>> Gpt2BpeTokenizer::Load(const std::string& vocab_path,
                                                                 const std::string& merges_path) {
  ELASTRAIN_ASSIGN_OR_RETURN(std::string vocab, ReadSmallFile(vocab_path, "GPT-2 vocab.json"));
  ELASTRAIN_ASSIGN_OR_RETURN(std::string merges, ReadSmallFile(merges_path, "GPT-2 merges.txt"));
  return FromText(vocab, merges, vocab_path, merges_path);
}

Result<std::unique_ptr<Gpt2BpeTokenizer>> Gpt2BpeTokenizer::FromText(std::string_view vocab_json,
                                                                     std::string_view merges_txt,
                                                                     const std::string& vocab_name,
                                                                     const std::string& merges_name) {
  const ByteAlphabet& alphabet = Alphabet();
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(vocab_json.begin(), vocab_json.end());
  } catch (const nlohmann::json::exception& e) {
    std::string why = e.what();
    if (size_t cut = why.find("] "); cut != std::string::npos) why = why.substr(cut + 2);
    return Status::InvalidArgument(vocab_name + ": not valid JSON (" + why +
                                   "): expected a JSON object of token -> id (Hugging Face's vocab.json)");
  }
  if (!vocab.is_object() || vocab.empty())
    return Status::InvalidArgument(vocab_name + ": a JSON " + std::string(vocab.type_name()) +
                                   ": expected a non-empty JSON object of token -> id (Hugging Face's vocab.json)");
  ELASTRAIN_ASSIGN_OR_RETURN(PreTokenizer pre, PreTokenizer::Compile(kGpt2Pattern));
  auto impl = std::make_unique<Impl>(std::move(pre));
  const size_t n = vocab.size();
  impl->bytes_of_id.resize(n);
  std::vector<bool> seen(n, false);
  StringMap<int32_t> id_of_token;
  id_of_token.reserve(n);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const std::string& token = it.key();
    const nlohmann::json& v = it.value();
    const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() < n
                          : v.is_number_integer() ? v.get<int64_t>() >= 0 && static_cast<uint64_t>(v.get<int64_t>()) < n
                                                  : false;
    if (!in_range)
      return Status::InvalidArgument(vocab_name + ": token " + Quote(token) + " has id " + v.dump() +
                                     ": expected an integer id in [0, " + std::to_string(n) + "), one per token (" +
                                     std::to_string(n) + " tokens)");
    const auto id = static_cast<int32_t>(v.get<int64_t>());
    if (seen[id])
      return Status::InvalidArgument(vocab_name + ": id " + std::to_string(id) + " is given to two tokens (one is " +
                                     Quote(token) + "): expected each id in [0, " + std::to_string(n) + ") once");
    if (token.empty()) return Status::InvalidArgument(vocab_name + ": the empty string has id " + std::to_string(id) + ": expected non-empty tokens");
    seen[id] = true;
    id_of_token.emplace(token, id);
    if (std::optional<std::string> bytes = alphabet.Bytes(token)) {
      impl->bytes_of_id[id] = std::move(*bytes);
    } else {  // an added token such as "<|im_start|>" with characters outside the byte alphabet
      impl->bytes_of_id[id] = token;
      impl->specials.emplace(token, id);
    }
  }
  if (auto eot = id_of_token.find("<|endoftext|>"); eot != id_of_token.end()) impl->specials.emplace(eot->first, eot->second);
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    AppendUtf8(alphabet.char_of_byte[b], &ch);
    auto it = id_of_token.find(ch);
    if (it == id_of_token.end())
      return Status::InvalidArgument(vocab_name + ": no token for byte " + HexByte(b) + " (" + Quote(ch) +
                                     "): expected all 256 byte tokens of GPT-2's byte-level alphabet");
    impl->byte_id[b] = it->second;
  }

  ELASTRAIN_ASSIGN_OR_RETURN(std::vector<std::string_view> lines, Lines(merges_txt, merges_name, "a merge \"A B\""));
  std::vector<size_t> line_of_rank;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    const size_t line_no = i + 1;
    if (i == 0 && line.starts_with("#version")) continue;
    if (const size_t valid = ValidUtf8Prefix(line); valid != line.size())
      return LineError(merges_name, line_no, "not valid UTF-8 at byte " + std::to_string(valid + 1) + ": expected a merge \"A B\" of two vocab.json tokens");
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos)
      return LineError(merges_name, line_no, Quote(line) + ": expected a merge \"A B\": two tokens separated by one space");
    const std::string_view a = line.substr(0, space), b = line.substr(space + 1);
    auto ia = id_of_token.find(a), ib = id_of_token.find(b);
    if (ia == id_of_token.end() || ib == id_of_token.end())
      return LineError(merges_name, line_no, "token " + Quote(ia == id_of_token.end() ? a : b) + " of merge " + Quote(line) + " is not in " + vocab_name + ": expected merges of vocabulary tokens");
    std::string joined = std::string(a) + std::string(b);
    auto im = id_of_token.find(joined);
    if (im == id_of_token.end())
      return LineError(merges_name, line_no, "merge " + Quote(line) + " makes " + Quote(joined) + ", which is not in " + vocab_name + ": expected every merged token in the vocabulary");
    const auto rank = static_cast<int32_t>(line_of_rank.size());
    auto [slot, fresh] = impl->merges.emplace(PairKey(ia->second, ib->second), bpe::Merge{rank, im->second});
    if (!fresh)
      return LineError(merges_name, line_no, "merge " + Quote(line) + " repeats line " + std::to_string(line_of_rank[slot->second.rank]) + ": expected each pair once");
    line_of_rank.push_back(line_no);
  }
  uint64_t h = Hash64(vocab_json.data(), vocab_json.size());
  h = Hash64(merges_txt.data(), merges_txt.size(), h);
  return std::unique_ptr<Gpt2BpeTokenizer>(new Gpt2BpeTokenizer(std::move(impl), "gpt2bpe:" + HexU64(h)));
}

Result<std::vector<int32_t>> Gpt2BpeTokenizer::Encode(const std::string& text) const {
  const Impl& m = *impl_;
  auto initial = [&](unsigned char b) { return m.byte_id[b]; };
  auto pair = [&](int32_t, const bpe::Symbol& l, const bpe::Symbol& r) -> std::optional<bpe::Merge> {
    auto it = m.merges.find(PairKey(l.id, r.id));
    if (it == m.merges.end()) return std::nullopt;
    return it->second;
  };
  return EncodePieces(m.pre, m.serial, text, [&](std::string_view piece, bpe::Scratch* scratch,
                                                   std::vector<int32_t>* out) {
    bpe::MergePiece(piece, initial, pair, scratch, out);
  });
}

std::string Gpt2BpeTokenizer::Decode(const std::vector<int32_t>& ids) const { return DecodeWith(impl_->bytes_of_id, ids); }
int64_t Gpt2BpeTokenizer::vocab_size() const { return static_cast<int64_t>(impl_->bytes_of_id.size()); }
std::optional<int32_t> Gpt2BpeTokenizer::SpecialToken(std::string_view name) const {
  return FindSpecial(impl_->specials, name);
}

// ---------------------------------------------------------------- tiktoken

struct TiktokenTokenizer::Impl {
  PreTokenizer pre;
  StringMap<int32_t> rank_of;  // token bytes -> rank (its id)
  std::array<int32_t, 256> byte_id{};
  std::vector<std::string> bytes_of_id;
  StringMap<int32_t> specials;
  uint64_t serial = bpe::PieceCache::NewSerial();
  explicit Impl(PreTokenizer p) : pre(std::move(p)) {}
};

TiktokenTokenizer::TiktokenTokenizer(std::unique_ptr<Impl> impl, std::string id)
    : impl_(std::move(impl)), id_(std::move(id)) {}
TiktokenTokenizer::~TiktokenTokenizer() = default;

Result<std::unique_ptr<TiktokenTokenizer>> TiktokenTokenizer::Load(const std::string& path) {
  ELASTRAIN_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path, "tiktoken BPE file"));
  return FromText(text, path);
}

Result<std::unique_ptr<TiktokenTokenizer>> TiktokenTokenizer::FromText(std::string_view text, const std::string& name) {
  constexpr std::string_view kExpected = "\"base64(token) rank\"";
  ELASTRAIN_ASSIGN_OR_RETURN(std::vector<std::string_view> lines, Lines(text, name, kExpected));
  if (lines.empty()) return Status::InvalidArgument(name + ": empty: expected lines of " + std::string(kExpected));
  ELASTRAIN_ASSIGN_OR_RETURN(PreTokenizer pre, PreTokenizer::Compile(kLlama3Pattern));
  auto impl = std::make_unique<Impl>(std::move(pre));
  const size_t n = lines.size();
  constexpr int64_t kMaxRank = int64_t{INT32_MAX} - kNumSpecialTokens;
  std::vector<size_t> line_of_rank(n, 0);
  impl->bytes_of_id.resize(n);
  impl->rank_of.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string_view line = lines[i];
    const size_t line_no = i + 1;
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos)
      return LineError(name, line_no, Quote(line) + ": expected " + std::string(kExpected) + ", two fields separated by one space");
    const std::string_view b64 = line.substr(0, space), rank_text = line.substr(space + 1);
    std::optional<std::string> token = DecodeBase64(b64);
    if (!token || token->empty())
      return LineError(name, line_no, Quote(b64) + " is not a token in base64: expected the token's bytes in standard base64 (A-Z a-z 0-9 + /, '=' padding)");
    int64_t rank = 0;
    bool ok = !rank_text.empty() && rank_text.size() <= 10;
    for (char c : rank_text) {
      ok = ok && c >= '0' && c <= '9';
      if (ok) rank = rank * 10 + (c - '0');
    }
    if (!ok || rank > kMaxRank)
      return LineError(name, line_no, "rank " + Quote(rank_text) + ": expected a decimal integer in [0, " + std::to_string(kMaxRank) + "]");
    if (static_cast<size_t>(rank) >= n)
      return LineError(name, line_no, "rank " + std::to_string(rank) + ": expected ranks 0.." + std::to_string(n - 1) + ", one per line of the " + std::to_string(n) + " lines");
    if (line_of_rank[rank] != 0)
      return LineError(name, line_no, "rank " + std::to_string(rank) + " repeats line " + std::to_string(line_of_rank[rank]) + ": expected each rank once");
    auto [slot, fresh] = impl->rank_of.emplace(*token, static_cast<int32_t>(rank));
    if (!fresh)
      return LineError(name, line_no, "token " + Quote(b64) + " (base64) repeats line " + std::to_string(line_of_rank[slot->second]) + ": expected each token once");
    line_of_rank[rank] = line_no;
    impl->bytes_of_id[rank] = std::move(*token);
  }
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    auto it = impl->rank_of.find(std::string_view(&c, 1));
    if (it == impl->rank_of.end())
      return Status::InvalidArgument(name + ": no token for byte " + HexByte(b) + ": expected all 256 single bytes among the tokens (byte-level BPE)");
    impl->byte_id[b] = it->second;
  }
  const std::vector<std::string> specials = Llama3SpecialTokens();
  for (size_t k = 0; k < specials.size(); ++k) {
    impl->specials.emplace(specials[k], static_cast<int32_t>(n + k));
    impl->bytes_of_id.push_back(specials[k]);
  }
  return std::unique_ptr<TiktokenTokenizer>(
      new TiktokenTokenizer(std::move(impl), "tiktoken:" + HexU64(Hash64(text.data(), text.size()))));
}

Result<std::vector<int32_t>> TiktokenTokenizer::Encode(const std::string& text) const {
  const Impl& m = *impl_;
  auto initial = [&](unsigned char b) { return m.byte_id[b]; };
  return EncodePieces(m.pre, m.serial, text, [&](std::string_view piece, bpe::Scratch* scratch,
                                                   std::vector<int32_t>* out) {
    if (auto whole = m.rank_of.find(piece); whole != m.rank_of.end()) {  // tiktoken's shortcut
      out->push_back(whole->second);
      return;
    }
    auto pair = [&](int32_t left, const bpe::Symbol&, const bpe::Symbol& r) -> std::optional<bpe::Merge> {
      auto it = m.rank_of.find(piece.substr(left, r.end - left));
      if (it == m.rank_of.end()) return std::nullopt;
      return bpe::Merge{it->second, it->second};
    };
    bpe::MergePiece(piece, initial, pair, scratch, out);
  });
}

std::string TiktokenTokenizer::Decode(const std::vector<int32_t>& ids) const { return DecodeWith(impl_->bytes_of_id, ids); }
int64_t TiktokenTokenizer::vocab_size() const { return static_cast<int64_t>(impl_->bytes_of_id.size()); }
std::optional<int32_t> TiktokenTokenizer::SpecialToken(std::string_view name) const {
  return FindSpecial(impl_->specials, name);
}

}  // namespace elastrain
