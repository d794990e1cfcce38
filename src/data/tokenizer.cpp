#include "data/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "common/files.h"
#include "common/log.h"
#include "data/corpus.h"

namespace elastrain {

// ---------------------------------------------------------------- bytes

Result<std::vector<int32_t>> ByteTokenizer::Encode(const std::string& text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::string text;
  text.reserve(ids.size());
  for (int32_t id : ids)
    if (id >= 0 && id < 256) text.push_back(static_cast<char>(id));
  return text;
}

// ---------------------------------------------------------------- sentencepiece

struct SentencePieceTokenizer::Impl {
  sentencepiece::SentencePieceProcessor sp;
};

SentencePieceTokenizer::SentencePieceTokenizer(std::unique_ptr<Impl> impl, std::string path, std::string id)
    : impl_(std::move(impl)), path_(std::move(path)), id_(std::move(id)) {}
SentencePieceTokenizer::~SentencePieceTokenizer() = default;

Result<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::Load(const std::string& model_path) {
  ELASTRAIN_ASSIGN_OR_RETURN(std::string bytes, ReadFile(model_path));
  auto impl = std::make_unique<Impl>();
  auto st = impl->sp.LoadFromSerializedProto(bytes);
  if (!st.ok())
    return Status::InvalidArgument(model_path + ": not a valid sentencepiece model (" + st.ToString() + ")");
  std::string id = "spm:" + HexU64(Hash64(bytes.data(), bytes.size()));
  return std::unique_ptr<SentencePieceTokenizer>(new SentencePieceTokenizer(std::move(impl), model_path, id));
}

Result<std::vector<int32_t>> SentencePieceTokenizer::Encode(const std::string& text) const {
  std::vector<int> ids;
  auto st = impl_->sp.Encode(text, &ids);
  if (!st.ok()) return Status::Internal(path_ + ": sentencepiece encode failed (" + st.ToString() + ")");
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string SentencePieceTokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::vector<int> in(ids.begin(), ids.end());
  std::string text;
  // Decode only fails for ids out of range; those are dropped rather than fatal.
  for (int& id : in)
    if (id < 0 || id >= impl_->sp.GetPieceSize()) id = impl_->sp.unk_id();
  impl_->sp.Decode(in, &text).IgnoreError();
  return text;
}

int64_t SentencePieceTokenizer::vocab_size() const { return impl_->sp.GetPieceSize(); }

namespace {

// A tiktoken file's first line is "base64 rank"; a sentencepiece model is a protobuf.
bool LooksLikeTiktoken(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(256, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  const size_t nl = head.find('\n');
  if (nl == std::string::npos) return false;
  std::string_view line(head.data(), nl);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const size_t space = line.find(' ');
  if (space == std::string_view::npos || space == 0 || space + 1 == line.size()) return false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    const bool ok = i < space ? (std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || c == '=')
                              : i == space || std::isdigit(static_cast<unsigned char>(c));
    if (!ok) return false;
  }
  return true;
}

template <typename T>
Result<std::unique_ptr<Tokenizer>> Upcast(Result<std::unique_ptr<T>> r) {
  if (!r.ok()) return Status(r.status());
  return std::unique_ptr<Tokenizer>(std::move(r).value());
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path, std::optional<TokenizerType> type) {
  const std::string type_name = type ? std::string(TokenizerTypeName(*type)) : std::string();
  if (path.empty()) {
    if (!type || *type == TokenizerType::kBytes || *type == TokenizerType::kSentencePiece)
      return std::unique_ptr<Tokenizer>(std::make_unique<ByteTokenizer>());
    return Status::InvalidArgument("tokenizer_type=" + type_name + " needs tokenizer_path (" +
                                   (*type == TokenizerType::kTiktoken ? "a tiktoken BPE file such as Llama 3's tokenizer.model"
                                                                      : "a directory with vocab.json and merges.txt") +
                                   ")");
  }
  if (type && *type == TokenizerType::kBytes)
    return Status::InvalidArgument("tokenizer_type=bytes takes no tokenizer_path (got " + path +
                                   "): leave tokenizer_path empty, or name the type of that file");
  const bool dir = IsDirectory(path);
  if (!type) {
    if (dir || path.ends_with(".json")) type = TokenizerType::kHuggingFace;
    else if (LooksLikeTiktoken(path)) type = TokenizerType::kTiktoken;
    else type = TokenizerType::kSentencePiece;
  }
  switch (*type) {
    case TokenizerType::kHuggingFace: {
      const std::string base = dir ? path : std::filesystem::path(path).parent_path().string();
      const std::string vocab = dir ? base + "/vocab.json" : path;
      const std::string merges = (base.empty() ? std::string(".") : base) + "/merges.txt";
      // Hugging Face's tokenizer.json (the fast tokenizer's one file) is not read; the GPT-2
      // repos ship vocab.json and merges.txt beside it.
      if (!dir && std::filesystem::path(path).filename() == "tokenizer.json")
        return Status::InvalidArgument("tokenizer_path=" + path +
                                       ": Hugging Face's tokenizer.json is not read; expected vocab.json with merges.txt "
                                       "beside it (give their directory), or tiktoken's file with tokenizer_type=tiktoken");
      if (!FileExists(vocab) || !FileExists(merges))
        return Status::NotFound("tokenizer_path=" + path + ": expected GPT-2 BPE files " + vocab + " and " + merges +
                                " (Hugging Face's vocab.json and merges.txt)" +
                                (FileExists(vocab) ? "; merges.txt is missing" : "; vocab.json is missing") +
                                (FileExists(base + "/tokenizer.json") ? " (tokenizer.json alone is not read)" : ""));
      return Upcast(Gpt2BpeTokenizer::Load(vocab, merges));
    }
    case TokenizerType::kTiktoken:
      return Upcast(TiktokenTokenizer::Load(path));
    default:
      return Upcast(SentencePieceTokenizer::Load(path));
  }
}

// ---------------------------------------------------------------- training

namespace {

// Feeds the lines of every corpus file to the trainer without a comma-joined --input
// list, so paths may hold any character.
class LineIterator final : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(std::vector<std::string> files) : files_(std::move(files)) { Advance(); }
  bool done() const override { return done_; }
  void Next() override { Advance(); }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return status_; }

 private:
  void Advance() {
    while (!done_) {
      if (in_.is_open() && std::getline(in_, line_)) return;
      if (in_.is_open() && in_.bad()) {
        Fail(files_[next_ - 1] + ": read failed");
        return;
      }
      in_.close();
      if (next_ == files_.size()) {
        done_ = true;
        return;
      }
      in_.clear();
      in_.open(files_[next_++], std::ios::binary);
      if (!in_) Fail(files_[next_ - 1] + ": cannot open for reading");
    }
  }
  void Fail(const std::string& msg) {
    status_ = sentencepiece::util::Status(sentencepiece::util::StatusCode::kNotFound, msg);
    done_ = true;
  }
  std::vector<std::string> files_;
  size_t next_ = 0;
  std::ifstream in_;
  std::string line_;
  bool done_ = false;
  sentencepiece::util::Status status_;
};

std::string VocabPathFor(const std::string& model_path) {
  const std::string ext = ".model";
  if (model_path.size() > ext.size() && model_path.compare(model_path.size() - ext.size(), ext.size(), ext) == 0)
    return model_path.substr(0, model_path.size() - ext.size()) + ".vocab";
  return model_path + ".vocab";
}

}  // namespace

Status TrainSentencePiece(const std::vector<std::string>& input_files, int64_t vocab_size,
                          const std::string& output_model_path) {
  if (input_files.empty()) return Status::InvalidArgument("tokenizer train: no input files given");
  if (output_model_path.empty()) return Status::InvalidArgument("tokenizer train: empty output path");
  // 256 byte pieces + <unk> <s> </s>; the trainer also needs one piece per character.
  constexpr int64_t kMinVocab = 256 + 3 + 1;
  if (vocab_size < kMinVocab || vocab_size > (int64_t{1} << 31) - 1)
    return Status::InvalidArgument("vocab_size=" + std::to_string(vocab_size) + ": expected at least " +
                                   std::to_string(kMinVocab) + " (256 byte pieces, 3 specials and the characters)");
  const std::string out_dir = std::filesystem::path(output_model_path).parent_path().string();
  if (!out_dir.empty()) ELASTRAIN_RETURN_IF_ERROR(MakeDirs(out_dir));
  std::vector<std::string> files;
  for (const std::string& in : input_files) {
    ELASTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> listed, ListCorpusFiles(in));
    files.insert(files.end(), listed.begin(), listed.end());
  }

  const std::unordered_map<std::string, std::string> kwargs = {
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(vocab_size)},
      {"character_coverage", "1.0"},
      {"byte_fallback", "true"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"split_digits", "true"},
      {"input_sentence_size", "0"},  // use every line: no random sampling
      {"shuffle_input_sentence", "false"},
      {"num_threads", "1"},
      {"minloglevel", "1"},
  };
  sentencepiece::SetRandomGeneratorSeed(0);
  LineIterator lines(files);
  std::string model;
  LOG_INFO("training sentencepiece BPE (vocab {}) on {} files", vocab_size, files.size());
  auto st = sentencepiece::SentencePieceTrainer::Train(kwargs, &lines, &model);
  if (!st.ok()) {
    // Drop sentencepiece's "file.cc(123) [condition] " prefix; keep its explanation.
    std::string why = st.message();
    if (size_t cut = why.find("] "); cut != std::string::npos) why = why.substr(cut + 2);
    std::string msg = "tokenizer train: sentencepiece failed: " + why;
    if (st.code() == sentencepiece::util::StatusCode::kNotFound) return Status::NotFound(msg);
    return Status::InvalidArgument(msg + " (vocab_size=" + std::to_string(vocab_size) + ")");
  }
  ELASTRAIN_RETURN_IF_ERROR(WriteFileAtomic(output_model_path, model));

  sentencepiece::SentencePieceProcessor sp;
  if (!sp.LoadFromSerializedProto(model).ok())
    return Status::Internal(output_model_path + ": trained model does not load back");
  std::string vocab;
  for (int i = 0; i < sp.GetPieceSize(); ++i)
    vocab += sp.IdToPiece(i) + "\t" + std::to_string(sp.GetScore(i)) + "\n";
  return WriteFileAtomic(VocabPathFor(output_model_path), vocab);
}

}  // namespace elastrain
