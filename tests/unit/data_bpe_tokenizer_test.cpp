// GPT-2 byte-level BPE and tiktoken BPE (src/data/tokenizer.h) on tiny hand-made
// vocabularies. The expected ids were derived by hand from the published rules, written
// out beside each case: GPT-2 merges the adjacent pair of lowest merges.txt rank; tiktoken
// takes a piece that is a token whole, else merges the adjacent pair whose concatenation
// has the lowest rank. The larger test against an independent Python implementation is
// tests/integration/test_tokenizers_bpe.sh (tests/reference/bpe_reference.py).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/files.h"
#include "data/pretokenize.h"
#include "data/tokenizer.h"
#include "test_dirs.h"

namespace elastrain {
namespace {

// GPT-2's byte alphabet, written independently of the reader: printable Latin-1 bytes
// stand for themselves, the others (in byte order) for U+0100, U+0101, ...
std::string ByteChar(int b) {
  const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  int cp = b;
  if (!printable) {
    cp = 256;
    for (int k = 0; k < b; ++k)
      if (!((k >= '!' && k <= '~') || (k >= 0xA1 && k <= 0xAC) || (k >= 0xAE && k <= 0xFF))) ++cp;
  }
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

// Ids 0..255: the byte tokens (id = byte); then the merges' tokens; then <|endoftext|>.
// " " is byte 0x20, whose character is U+0120 "Ġ".
struct TinyGpt2 {
  std::string vocab, merges;
  TinyGpt2() {
    nlohmann::json v = nlohmann::json::object();
    for (int b = 0; b < 256; ++b) v[ByteChar(b)] = b;
    const std::vector<std::pair<std::string, std::string>> m = {
        {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {"Ġ", "w"}, {"o", "r"}, {"Ġw", "or"}};
    merges = "#version: 0.2\n";
    int id = 256;
    for (const auto& [a, b] : m) {
      v[a + b] = id++;  // he 256, ll 257, hell 258, hello 259, Ġw 260, or 261, Ġwor 262
      merges += a + " " + b + "\n";
    }
    v["<|endoftext|>"] = id;  // 263
    vocab = v.dump();
  }
};

std::unique_ptr<Gpt2BpeTokenizer> Gpt2(const TinyGpt2& t = TinyGpt2()) {
  auto tok = Gpt2BpeTokenizer::FromText(t.vocab, t.merges, "vocab.json", "merges.txt");
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

std::vector<int32_t> Ids(const Tokenizer& t, const std::string& text) {
  auto ids = t.Encode(text);
  EXPECT_TRUE(ids.ok()) << ids.status().ToString();
  if (ids.ok()) {
    EXPECT_EQ(t.Decode(*ids), text) << "decode(encode(x)) != x";
  }
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

std::vector<std::string> Pieces(std::string_view pattern, const std::string& text) {
  auto pre = PreTokenizer::Compile(pattern);
  EXPECT_TRUE(pre.ok());
  auto pieces = pre->Split(text);
  EXPECT_TRUE(pieces.ok());
  return std::vector<std::string>(pieces->begin(), pieces->end());
}

using Strings = std::vector<std::string>;
using IdList = std::vector<int32_t>;

TEST(PreTokenizerTest, Gpt2Pattern) {
  // "  world": \s+(?!\S) gives back the space before "w", which " ?\p{L}+" takes; "\n\n"
  // before a letter splits the same way, and the last "\n" has nothing but \s+.
  EXPECT_EQ(Pieces(kGpt2Pattern, "Hello  world\n\nIt's 2024!!"),
            (Strings{"Hello", " ", " world", "\n", "\n", "It", "'s", " 2024", "!!"}));
  EXPECT_EQ(Pieces(kGpt2Pattern, "don't  "), (Strings{"don", "'t", "  "}));
  EXPECT_EQ(Pieces(kGpt2Pattern, "café 日本語"), (Strings{"café", " 日本語"}));
  // \s is Unicode's White_Space: U+2028 is (a run of two before a letter: \s+(?!\S) gives
  // back the second, which " ?" cannot take, so \s+ does), U+180E (a format character
  // since Unicode 6.3, still in PCRE2's own \s) is not: punctuation between the letters.
  EXPECT_EQ(Pieces(kGpt2Pattern, "a\u2028\u2028b"), (Strings{"a", "\u2028", "\u2028", "b"}));
  EXPECT_EQ(Pieces(kGpt2Pattern, "a\u180eb"), (Strings{"a", "\u180e", "b"}));
}

TEST(PreTokenizerTest, Llama3Pattern) {
  // Newline runs stay whole (\s*[\r\n]+), digits go in threes, contractions ignore case.
  EXPECT_EQ(Pieces(kLlama3Pattern, "Hello  world\n\nIT'S 12345"),
            (Strings{"Hello", " ", " world", "\n\n", "IT", "'S", " ", "123", "45"}));
  EXPECT_EQ(Pieces(kLlama3Pattern, "x+=1;\r\n  y"), (Strings{"x", "+=", "1", ";\r\n", " ", " y"}));
}

TEST(PreTokenizerTest, InvalidUtf8BytesArePiecesOfTheirOwn) {
  const std::string text = "ab\xff\xc3 cd\xed\xa0\x80";
  EXPECT_EQ(Pieces(kGpt2Pattern, text), (Strings{"ab", "\xff", "\xc3", " cd", "\xed", "\xa0", "\x80"}));
  EXPECT_EQ(ValidUtf8Prefix("é\xc0\xaf"), 2u);  // an overlong '/' is invalid
  EXPECT_EQ(ValidUtf8Prefix("\xf4\x90\x80\x80"), 0u);  // above U+10FFFF
}

TEST(Gpt2BpeTest, HandMadeVocabulary) {
  auto tok = Gpt2();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 264);
  // "hello": (h,e) rank 0 and (l,l) rank 1 -> he ll o; (he,ll) rank 2 -> hell o; rank 3 -> hello.
  // " world": Ġ w o r l d; (Ġ,w) rank 4, (o,r) rank 5, (Ġw,or) rank 6 -> Ġwor l d.
  EXPECT_EQ(Ids(*tok, "hello world"), (IdList{259, 262, 'l', 'd'}));
  // One piece, both "he" merge (leftmost first), then both "ll", "hell", "hello".
  EXPECT_EQ(Ids(*tok, "hellohello"), (IdList{259, 259}));
  // "hel": (h,e) -> he l; (he,l) has no rank.
  EXPECT_EQ(Ids(*tok, "hel"), (IdList{256, 'l'}));
  // Bytes outside ASCII: é is C3 A9 -> two byte tokens; \n is byte 10.
  EXPECT_EQ(Ids(*tok, "é\n"), (IdList{0xC3, 0xA9, 10}));
  EXPECT_EQ(Ids(*tok, ""), IdList{});
}

TEST(Gpt2BpeTest, SpecialIsNeverMadeFromText) {
  auto tok = Gpt2();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->SpecialToken("<|endoftext|>"), 263);
  EXPECT_EQ(tok->SpecialToken("<|nope|>"), std::nullopt);
  EXPECT_EQ(tok->Decode({263}), "<|endoftext|>");
  // "<|" and "|>" are punctuation pieces, "endoftext" letters: bytes, no special.
  const std::vector<int32_t> ids = Ids(*tok, "<|endoftext|>");
  EXPECT_EQ(ids.size(), 13u);
  for (int32_t id : ids) EXPECT_LT(id, 256);
}

TEST(Gpt2BpeTest, ExactForAnyBytes) {
  auto tok = Gpt2();
  ASSERT_NE(tok, nullptr);
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  all += "\xc3\x28 hello\xff\xfe world \xe2\x82";  // invalid sequences among valid text
  Ids(*tok, all);
  EXPECT_EQ(tok->Decode({-1, 264, 1 << 30}), "");  // ids out of range are dropped
}

TEST(Gpt2BpeTest, IdIsTheVocabulary) {
  TinyGpt2 a, b;
  b.merges += "Ġwor l\n";
  b.vocab.back() = ',';
  b.vocab += "\"Ġworl\":264}";
  auto ta = Gpt2(a), tb = Gpt2(b);
  ASSERT_NE(ta, nullptr);
  ASSERT_NE(tb, nullptr);
  EXPECT_EQ(ta->id().rfind("gpt2bpe:", 0), 0u);
  EXPECT_NE(ta->id(), tb->id());
  EXPECT_EQ(ta->id(), Gpt2(a)->id());
  EXPECT_EQ(Ids(*tb, " world"), (IdList{264, 'd'}));
}

// Every refusal names the file (and line) and what was expected.
void ExpectGpt2Error(const std::string& vocab, const std::string& merges, const std::string& needle) {
  auto tok = Gpt2BpeTokenizer::FromText(vocab, merges, "dir/vocab.json", "dir/merges.txt");
  ASSERT_FALSE(tok.ok()) << needle;
  EXPECT_NE(tok.status().message().find(needle), std::string::npos) << tok.status().message();
  EXPECT_NE(tok.status().message().find("expected"), std::string::npos) << tok.status().message();
}

TEST(Gpt2BpeTest, HostileFilesGetClearErrors) {
  const TinyGpt2 t;
  ExpectGpt2Error("{\"a\": 0,", t.merges, "dir/vocab.json: not valid JSON");
  ExpectGpt2Error("[1, 2]", t.merges, "dir/vocab.json: a JSON array");
  ExpectGpt2Error("{\"a\": 4294967296}", t.merges, "has id 4294967296");
  ExpectGpt2Error("{\"a\": -1}", t.merges, "has id -1");
  ExpectGpt2Error("{\"a\": \"x\"}", t.merges, "has id \"x\"");
  ExpectGpt2Error("{\"a\": 0, \"b\": 0}", t.merges, "id 0 is given to two tokens");
  ExpectGpt2Error("{\"a\": 0}", t.merges, "no token for byte 0x00");
  ExpectGpt2Error("{\"a\xff\": 0}", t.merges, "not valid JSON");
  ExpectGpt2Error(t.vocab, t.merges + "h x y\n", "dir/merges.txt: line 9");
  ExpectGpt2Error(t.vocab, t.merges + "h Q\n", "makes \"hQ\", which is not in dir/vocab.json");
  ExpectGpt2Error(t.vocab, t.merges + "h 日\n", "token \"日\" of merge");
  ExpectGpt2Error(t.vocab, t.merges + "h e\n", "line 9: merge \"h e\" repeats line 2");
  ExpectGpt2Error(t.vocab, t.merges + "h \xff\n", "line 9: not valid UTF-8");
  ExpectGpt2Error(t.vocab, t.merges + std::string(5000, 'h') + " e\n", "line 9 is 5002 bytes long");
  ExpectGpt2Error(t.vocab, "h e\n\nl l\n", "line 2: \"\": expected a merge");
}

// Ranks 0..255: the bytes (rank = byte); then he 256, ll 257, hell 258, hello 259,
// " w" 260, or 261, " wor" 262; specials from 263.
std::string TinyTiktoken() {
  auto b64 = [](const std::string& s) {
    static const char* abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    for (size_t i = 0; i < s.size(); i += 3) {
      uint32_t v = static_cast<unsigned char>(s[i]) << 16;
      if (i + 1 < s.size()) v |= static_cast<unsigned char>(s[i + 1]) << 8;
      if (i + 2 < s.size()) v |= static_cast<unsigned char>(s[i + 2]);
      out += abc[v >> 18];
      out += abc[(v >> 12) & 63];
      out += i + 1 < s.size() ? abc[(v >> 6) & 63] : '=';
      out += i + 2 < s.size() ? abc[v & 63] : '=';
    }
    return out;
  };
  std::string text;
  for (int b = 0; b < 256; ++b) text += b64(std::string(1, static_cast<char>(b))) + " " + std::to_string(b) + "\n";
  int rank = 256;
  for (const char* t : {"he", "ll", "hell", "hello", " w", "or", " wor"}) text += b64(t) + " " + std::to_string(rank++) + "\n";
  return text;
}

TEST(TiktokenTest, HandMadeVocabulary) {
  auto tok = TiktokenTokenizer::FromText(TinyTiktoken(), "tok.model");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const Tokenizer& t = **tok;
  EXPECT_EQ(t.vocab_size(), 263 + 256);
  // "hello" is a token: taken whole. " world" (Llama 3 keeps the space with the letters):
  // " w" 260 is the lowest pair, then "or" 261, then " wor" 262; "l d" and " worl" have none.
  EXPECT_EQ(Ids(t, "hello world"), (IdList{259, 262, 'l', 'd'}));
  // "hel": "he" 256; "hel" is no token.
  EXPECT_EQ(Ids(t, "hel"), (IdList{256, 'l'}));
  // Digits in threes, each digit a byte here; "\n\n" one piece of two bytes.
  EXPECT_EQ(Ids(t, "1234\n\n"), (IdList{'1', '2', '3', '4', '\n', '\n'}));
  EXPECT_EQ(t.SpecialToken("<|begin_of_text|>"), 263);
  EXPECT_EQ(t.SpecialToken("<|end_of_text|>"), 264);
  EXPECT_EQ(t.SpecialToken("<|start_header_id|>"), 269);
  EXPECT_EQ(t.SpecialToken("<|eot_id|>"), 272);
  EXPECT_EQ(t.SpecialToken("<|reserved_special_token_246|>"), 263 + 255);
  EXPECT_EQ(t.Decode({259, 272}), "hello<|eot_id|>");
  EXPECT_EQ(t.id().rfind("tiktoken:", 0), 0u);
  std::string bytes;
  for (int b = 255; b >= 0; --b) bytes.push_back(static_cast<char>(b));
  Ids(t, bytes + " héllo 😀 \xff");
}

TEST(TiktokenTest, ManyThreadsEncodeTheSame) {
  auto tok = TiktokenTokenizer::FromText(TinyTiktoken(), "tok.model");
  ASSERT_TRUE(tok.ok());
  std::string text;
  for (int i = 0; i < 2000; ++i) text += i % 3 ? "hello world " : "hel wor 12345\n";
  const std::vector<int32_t> want = (*tok)->Encode(text).value();
  std::vector<std::thread> threads;
  std::vector<int> same(4, 0);
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] { same[k] = (*tok)->Encode(text).value() == want; });
  for (auto& th : threads) th.join();
  EXPECT_EQ(same, (std::vector<int>{1, 1, 1, 1}));
}

void ExpectTiktokenError(const std::string& text, const std::string& needle) {
  auto tok = TiktokenTokenizer::FromText(text, "dir/tok.model");
  ASSERT_FALSE(tok.ok()) << needle;
  EXPECT_NE(tok.status().message().find(needle), std::string::npos) << tok.status().message();
  EXPECT_NE(tok.status().message().find("dir/tok.model"), std::string::npos) << tok.status().message();
  EXPECT_NE(tok.status().message().find("expected"), std::string::npos) << tok.status().message();
}

TEST(TiktokenTest, HostileFilesGetClearErrors) {
  const std::string ok = TinyTiktoken();  // 263 lines
  ExpectTiktokenError("", "empty");
  ExpectTiktokenError(ok + "aGk= 263 x\n", "line 264");
  ExpectTiktokenError(ok + "a*k= 263\n", "line 264: \"a*k=\" is not a token in base64");
  ExpectTiktokenError(ok + "aGk 263\n", "is not a token in base64");
  ExpectTiktokenError(ok + "aGk= 9999999999\n", "rank \"9999999999\"");
  ExpectTiktokenError(ok + "aGk= -1\n", "rank \"-1\"");
  ExpectTiktokenError(ok + "aGk= 264\n", "line 264: rank 264: expected ranks 0..263");
  ExpectTiktokenError(ok + "aGk= 5\n", "line 264: rank 5 repeats line 6");
  ExpectTiktokenError(ok + "aGU= 263\n", "token \"aGU=\" (base64) repeats line 257");
  ExpectTiktokenError(ok + std::string(5000, 'A') + " 263\n", "line 264 is 5004 bytes long");
  ExpectTiktokenError("aGk= 0\n", "no token for byte 0x00");
}

TEST(LoadTokenizerTest, PicksTheTypeFromThePath) {
  ScopedTempDir scratch("tok_bpe");
  const std::string dir = scratch.path();
  const TinyGpt2 g;
  ASSERT_TRUE(WriteFileAtomic(dir + "/vocab.json", g.vocab).ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/merges.txt", g.merges).ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/tokenizer.model", TinyTiktoken()).ok());
  auto from_dir = LoadTokenizer(dir);
  ASSERT_TRUE(from_dir.ok()) << from_dir.status().ToString();
  EXPECT_EQ((*from_dir)->id().rfind("gpt2bpe:", 0), 0u);
  auto from_vocab = LoadTokenizer(dir + "/vocab.json");
  ASSERT_TRUE(from_vocab.ok()) << from_vocab.status().ToString();
  EXPECT_EQ((*from_vocab)->id(), (*from_dir)->id());
  auto tik = LoadTokenizer(dir + "/tokenizer.model");
  ASSERT_TRUE(tik.ok()) << tik.status().ToString();
  EXPECT_EQ((*tik)->id().rfind("tiktoken:", 0), 0u);
  auto as_spm = LoadTokenizer(dir + "/tokenizer.model", TokenizerType::kSentencePiece);
  EXPECT_FALSE(as_spm.ok());
  auto bytes = LoadTokenizer("", TokenizerType::kSentencePiece);  // MaxText's default type, no path
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ((*bytes)->id(), "bytes");
  EXPECT_FALSE(LoadTokenizer("", TokenizerType::kTiktoken).ok());
  EXPECT_FALSE(LoadTokenizer(dir, TokenizerType::kBytes).ok());
  ASSERT_TRUE(std::filesystem::remove(dir + "/merges.txt"));
  auto missing = LoadTokenizer(dir);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("merges.txt is missing"), std::string::npos) << missing.status().message();
  ASSERT_TRUE(WriteFileAtomic(dir + "/tokenizer.json", "{}").ok());
  auto fast = LoadTokenizer(dir + "/tokenizer.json");
  ASSERT_FALSE(fast.ok());
  EXPECT_NE(fast.status().message().find("tokenizer.json is not read"), std::string::npos) << fast.status().message();
}

}  // namespace
}  // namespace elastrain
