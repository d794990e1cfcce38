#include "data/prepare.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "common/files.h"
#include "common/raw_bytes.h"
#include "data/corpus.h"
#include "data/jsonl.h"
#include "data/llmc_writer.h"
#include "data/token_files.h"
#include "data/tokenizer.h"

namespace elastrain {

namespace fs = std::filesystem;

namespace {

constexpr char kWorkDir[] = ".prepare";
constexpr char kPlanFile[] = "plan";
constexpr char kPartMagic[8] = {'E', 'L', 'P', 'A', 'R', 'T', '0', '1'};
constexpr size_t kPartHeaderBytes = 48;  // magic, plan, unit, tokens, documents, payload hash

struct Input {
  std::string path;  // absolute
  DatasetType format = DatasetType::kText;
  std::shared_ptr<const MappedFile> map;
  uint64_t hash = 0;
};

// A range of one input's bytes, tokenised as a whole.
struct Unit {
  size_t input = 0;
  uint64_t begin = 0, end = 0;
  int64_t first_line = 1;  // jsonl: the range's first line number
};

struct UnitResult {
  std::vector<int32_t> tokens;
  int64_t documents = 0;
};

std::string_view Bytes(const Input& in, const Unit& u) {
  return {reinterpret_cast<const char*>(in.map->data()) + u.begin, static_cast<size_t>(u.end - u.begin)};
}


bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string TokenizerTypeOf(const Tokenizer& t) {
  const std::string id = t.id();
  if (id == "bytes") return "bytes";
  if (id.rfind("spm:", 0) == 0) return "sentencepiece";
  if (id.rfind("gpt2bpe:", 0) == 0) return "huggingface";
  if (id.rfind("tiktoken:", 0) == 0) return "tiktoken";
  return id;
}

// The inputs' files, absolute, in the order given (each directory or glob sorted), mapped.
Result<std::vector<Input>> OpenInputs(const PrepareOptions& o, DatasetType format) {
  std::vector<Input> out;
  for (const std::string& p : o.inputs) {
    std::vector<std::string> files;
    if (!LooksLikeGlob(p) && !FileExists(p)) return Status::NotFound("input " + p + ": no such file or directory");
    if (format == DatasetType::kJsonl) {
      ELASTRAIN_ASSIGN_OR_RETURN(files, ListDataFiles(p, ".jsonl", "JSONL files"));
    } else if (IsDirectory(p)) {
      ELASTRAIN_ASSIGN_OR_RETURN(files, ListCorpusFiles(p));
    } else {
      ELASTRAIN_ASSIGN_OR_RETURN(files, ListDataFiles(p, "", "files"));
    }
    for (const std::string& f : files) {
      Input in;
      in.path = fs::absolute(f).lexically_normal().string();
      in.format = format;
      ELASTRAIN_ASSIGN_OR_RETURN(in.map, MappedFile::Open(f));
      in.hash = Hash64(in.map->data(), in.map->size());
      out.push_back(std::move(in));
    }
  }
  return out;
}

bool PrintableAscii(uint8_t c) { return c >= 0x21 && c <= 0x7e; }

// Where a unit may end at or after `target` (0 < target < size): the next line start of a
// JSONL file; for text, the next line start between two printable ASCII bytes ("x\ny"):
// the "\n" is a piece of its own there whether text follows or the unit ends (a longer
// whitespace run would not be: "\s+(?!\S)" takes "\n\n" whole at the end of a text,
// but only "\n" before a letter). `size` if none.
uint64_t NextCut(const uint8_t* data, uint64_t size, uint64_t target, bool jsonl) {
  uint64_t from = target - 1;
  while (from < size) {
    const void* nl = std::memchr(data + from, '\n', size - from);
    if (!nl) return size;
    const uint64_t next = static_cast<uint64_t>(static_cast<const uint8_t*>(nl) - data) + 1;
    if (next >= size) return size;
    if (jsonl || (next >= 2 && PrintableAscii(data[next - 2]) && PrintableAscii(data[next]))) return next;
    from = next;
  }
  return size;
}

std::vector<Unit> PlanUnits(const std::vector<Input>& inputs, int64_t chunk_bytes, bool cut_text) {
  std::vector<Unit> units;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const uint8_t* data = inputs[i].map->data();
    const uint64_t size = inputs[i].map->size();
    const bool jsonl = inputs[i].format == DatasetType::kJsonl;
    int64_t line = 1;
    for (uint64_t pos = 0; pos < size;) {
      uint64_t end = size;
      if ((jsonl || cut_text) && size - pos > static_cast<uint64_t>(chunk_bytes))
        end = NextCut(data, size, pos + static_cast<uint64_t>(chunk_bytes), jsonl);
      units.push_back({i, pos, end, line});
      if (jsonl) line += std::count(data + pos, data + end, '\n');
      pos = end;
    }
  }
  return units;
}

std::string PartPath(const std::string& dir, size_t unit) {
  return (fs::path(dir) / kWorkDir / fmt::format("part_{:08d}.bin", unit)).string();
}

// A part file: the header, then the tokens in the shards' width (2 or 4 bytes).
std::string SerializePart(uint64_t plan, size_t unit, const UnitResult& r, size_t width) {
  std::string payload(r.tokens.size() * width, '\0');
  for (size_t j = 0; j < r.tokens.size(); ++j) {
    if (width == 2) {
      const uint16_t v = static_cast<uint16_t>(r.tokens[j]);
      std::memcpy(payload.data() + 2 * j, &v, 2);
    } else {
      std::memcpy(payload.data() + 4 * j, &r.tokens[j], 4);
    }
  }
  std::string out(kPartMagic, sizeof(kPartMagic));
  PutRaw<uint64_t>(&out, plan);
  PutRaw<uint64_t>(&out, unit);
  PutRaw<uint64_t>(&out, r.tokens.size());
  PutRaw<uint64_t>(&out, static_cast<uint64_t>(r.documents));
  PutRaw<uint64_t>(&out, Hash64(payload.data(), payload.size()));
  return out + payload;
}

// Written to PATH.tmp and renamed, without fsync: a part is only ever trusted after its
// checksum is checked, so one that a crash left short or stale is redone, not used.
Status WritePart(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::IOError(tmp + ": cannot create (" + std::strerror(errno) + ")");
  const char* p = data.data();
  size_t n = data.size();
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      const Status st = Status::IOError(tmp + ": cannot write (" + std::strerror(errno) + ")");
      ::close(fd);
      ::unlink(tmp.c_str());
      return st;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  if (::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const Status st = Status::IOError(path + ": cannot write (" + std::strerror(errno) + ")");
    ::unlink(tmp.c_str());
    return st;
  }
  return Status::OK();
}

// A part file of this plan and unit, every token below vocab_size; Corruption otherwise.
Result<UnitResult> ReadPart(const std::string& path, uint64_t plan, size_t unit, size_t width, int64_t vocab_size) {
  ELASTRAIN_ASSIGN_OR_RETURN(std::string data, ReadFile(path));
  auto bad = [&](const std::string& why) { return Status::Corruption(path + ": " + why); };
  if (data.size() < kPartHeaderBytes || std::memcmp(data.data(), kPartMagic, sizeof(kPartMagic)) != 0)
    return bad("not a part file (bad magic or short)");
  if (GetRaw<uint64_t>(data, 8) != plan || GetRaw<uint64_t>(data, 16) != unit) return bad("of another plan or unit");
  const uint64_t count = GetRaw<uint64_t>(data, 24);
  const size_t payload = data.size() - kPartHeaderBytes;
  if (count > payload / width || count * width != payload)
    return bad(fmt::format("{} payload bytes for {} tokens", payload, count));
  const char* p = data.data() + kPartHeaderBytes;
  if (Hash64(p, payload) != GetRaw<uint64_t>(data, 40)) return bad("checksum mismatch");
  UnitResult r;
  r.documents = static_cast<int64_t>(GetRaw<uint64_t>(data, 32));
  r.tokens.resize(count);
  for (size_t j = 0; j < count; ++j) {
    if (width == 2) {
      uint16_t v;
      std::memcpy(&v, p + 2 * j, 2);
      r.tokens[j] = v;
    } else {
      std::memcpy(&r.tokens[j], p + 4 * j, 4);
    }
    if (r.tokens[j] < 0 || r.tokens[j] >= vocab_size)
      return bad(fmt::format("token {} outside the vocabulary of {}", r.tokens[j], vocab_size));
  }
  return r;
}

struct Job {
  const PrepareOptions& o;
  const Tokenizer& tok;
  std::optional<int32_t> doc_token;
  std::vector<Input> inputs;
  std::vector<Unit> units;
  uint64_t plan = 0;
};

Result<UnitResult> Tokenise(const Job& job, const Unit& u) {
  const Input& in = job.inputs[u.input];
  const std::string_view bytes = Bytes(in, u);
  UnitResult r;
  auto where = [&] { return fmt::format("{} bytes [{}, {})", in.path, u.begin, u.end); };
  auto encode = [&](const std::string& text) -> Status {
    auto ids = job.tok.Encode(text);
    if (!ids.ok()) return Status::InvalidArgument(where() + ": " + ids.status().message());
    r.tokens.insert(r.tokens.end(), ids->begin(), ids->end());
    return Status::OK();
  };
  if (in.format == DatasetType::kJsonl) {
    ELASTRAIN_RETURN_IF_ERROR(
        ForEachJsonlDocument(in.path, bytes, job.o.text_field, u.first_line, [&](const std::string& text) {
          ++r.documents;
          if (job.doc_token) {
            r.tokens.push_back(*job.doc_token);
            return encode(text);
          }
          return encode(text + "\n");
        }));
    return r;
  }
  if (u.begin == 0) {
    r.documents = 1;
    if (job.doc_token) r.tokens.push_back(*job.doc_token);
  }
  ELASTRAIN_RETURN_IF_ERROR(encode(std::string(bytes)));
  return r;
}

// The output directory before the run: Ok(true) when it already holds this plan's
// finished files, Ok(false) when the run may go on (new, empty, or this plan's parts).
Result<bool> CheckOutputDir(const std::string& dir, const std::string& plan_hex) {
  const std::string manifest = (fs::path(dir) / kPreparedManifestName).string();
  const std::string plan_file = (fs::path(dir) / kWorkDir / kPlanFile).string();
  const char* advice = ": choose another output directory, or remove it to prepare again";
  if (FileExists(manifest)) {
    ELASTRAIN_ASSIGN_OR_RETURN(std::string text, ReadFile(manifest));
    ELASTRAIN_ASSIGN_OR_RETURN(PreparedManifest m, ParsePreparedManifest(text, manifest));
    if (m.plan != plan_hex)
      return Status::FailedPrecondition(manifest + ": prepared from other inputs, tokenizer or options (plan " + m.plan +
                                        ", this run's " + plan_hex + ")" + advice);
    return true;
  }
  if (FileExists(plan_file)) {
    ELASTRAIN_ASSIGN_OR_RETURN(std::string text, ReadFile(plan_file));
    const std::string theirs = text.substr(0, text.find('\n'));
    if (theirs != plan_hex)
      return Status::FailedPrecondition(plan_file + ": an interrupted prepare of other inputs, tokenizer or options " +
                                        "(plan " + theirs + ", this run's " + plan_hex + ")" + advice);
    return false;
  }
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) return Status::FailedPrecondition(dir + ": not a directory" + advice);
    if (!fs::is_empty(dir, ec))
      return Status::FailedPrecondition(dir + ": not empty, and holds no prepare of these inputs" + advice);
  }
  return false;
}

// The shards of a finished directory are all there, of their manifest's sizes.
Status CheckShardsPresent(const std::string& dir, const PreparedManifest& m) {
  const uint64_t width = m.llmc_version == 1 ? 2 : 4;
  for (const PreparedShard& s : m.shards) {
    const std::string p = (fs::path(dir) / s.file).string();
    std::error_code ec;
    const uint64_t size = fs::file_size(p, ec);
    const uint64_t want = kLlmcHeaderBytes + static_cast<uint64_t>(s.tokens) * width;
    if (ec || size != want)
      return Status::Corruption(p + ": " + (ec ? "missing" : std::to_string(size) + " bytes") + ", " +
                                kPreparedManifestName + " says " + std::to_string(want) +
                                " bytes: remove the directory and prepare again");
  }
  return Status::OK();
}

}  // namespace

Result<PrepareReport> PrepareTokenFiles(const PrepareOptions& o,
                                        const std::function<void(const PrepareProgress&)>& progress,
                                        double progress_period_seconds, const std::atomic<bool>* stop) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  if (o.inputs.empty()) return Status::InvalidArgument("no input: expected text or .jsonl files to tokenise");
  if (o.output_dir.empty()) return Status::InvalidArgument("no output directory");
  if (o.shard_tokens < 1 || o.shard_tokens > (int64_t{1} << 31) - 1)
    return Status::InvalidArgument(fmt::format("shard tokens {}: expected 1 to {}", o.shard_tokens, (1LL << 31) - 1));
  if (o.chunk_bytes < 1) return Status::InvalidArgument(fmt::format("chunk bytes {}: expected >= 1", o.chunk_bytes));
  if (o.workers < 0 || o.workers > 1024)
    return Status::InvalidArgument(fmt::format("workers {}: expected 0 (one per core) to 1024", o.workers));
  DatasetType format = DatasetType::kJsonl;
  if (o.format) {
    format = *o.format;
    if (format != DatasetType::kText && format != DatasetType::kJsonl)
      return Status::InvalidArgument(std::string("format ") + std::string(DatasetTypeName(format)) +
                                     ": expected text or jsonl (the others are token files already)");
  } else {
    for (const std::string& p : o.inputs)
      if (!EndsWith(p, ".jsonl")) format = DatasetType::kText;
  }
  ELASTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, LoadTokenizer(o.tokenizer_path, o.tokenizer_type));
  Job job{o, *tok, std::nullopt, {}, {}, 0};
  std::string doc_name;
  for (const char* name : {"<|endoftext|>", "<|begin_of_text|>"})
    if (auto id = tok->SpecialToken(name); id && !job.doc_token) {
      job.doc_token = *id;
      doc_name = name;
    }
  ELASTRAIN_ASSIGN_OR_RETURN(job.inputs, OpenInputs(o, format));
  const bool cut_text = tok->id().rfind("spm:", 0) != 0;
  job.units = PlanUnits(job.inputs, o.chunk_bytes, cut_text);

  // The plan: everything that decides the files.
  std::string material = "elastrain data prepare v1";
  material.push_back('\0');
  material += tok->id() + '\0' + doc_name + '\0' + o.text_field + '\0' + std::string(DatasetTypeName(format)) + '\0';
  PutRaw<int64_t>(&material, o.chunk_bytes);
  PutRaw<int64_t>(&material, o.shard_tokens);
  for (const Input& in : job.inputs) {
    material += in.path;
    material.push_back('\0');
    PutRaw<uint64_t>(&material, in.map->size());
    PutRaw<uint64_t>(&material, in.hash);
  }
  job.plan = Hash64(material.data(), material.size());
  const std::string plan_hex = HexU64(job.plan);

  PrepareReport report;
  report.units = static_cast<int64_t>(job.units.size());
  ELASTRAIN_ASSIGN_OR_RETURN(bool done, CheckOutputDir(o.output_dir, plan_hex));
  if (done) {
    const std::string mpath = (fs::path(o.output_dir) / kPreparedManifestName).string();
    ELASTRAIN_ASSIGN_OR_RETURN(std::string text, ReadFile(mpath));
    ELASTRAIN_ASSIGN_OR_RETURN(report.manifest, ParsePreparedManifest(text, mpath));
    ELASTRAIN_RETURN_IF_ERROR(CheckShardsPresent(o.output_dir, report.manifest));
    report.up_to_date = true;
    report.seconds = since(start);
    return report;
  }
  ELASTRAIN_RETURN_IF_ERROR(MakeDirs((fs::path(o.output_dir) / kWorkDir).string()));
  ELASTRAIN_RETURN_IF_ERROR(WriteFileAtomic((fs::path(o.output_dir) / kWorkDir / kPlanFile).string(),
                                            plan_hex + "\n" + tok->id() + "\n"));

  // Workers tokenise the units in turn (a valid part from an earlier run is read instead)
  // and hand them over; this thread appends them, in order, to the shards as they come,
  // so the writing overlaps the tokenising. A worker waits while it is more than `window`
  // units ahead of the writer (the memory held is bounded).
  const int workers = o.workers > 0 ? o.workers : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  report.workers = workers;
  const size_t n = job.units.size();
  const size_t window = 2 * static_cast<size_t>(workers) + 2;
  const size_t width = tok->vocab_size() > 65536 ? 4 : 2;
  LlmcShardWriter writer(o.output_dir, width == 2 ? 1 : 2, o.shard_tokens);
  std::vector<int64_t> unit_tokens(n, 0), unit_documents(n, 0);
  std::atomic<size_t> next{0};
  std::atomic<int64_t> units_done{0}, units_resumed{0}, tokens_done{0};
  std::atomic<uint64_t> bytes_done{0}, bytes_new{0};
  std::atomic<bool> failed{false};
  std::mutex mu;  // guards ready, written, running, error, error_unit
  std::condition_variable cv;
  std::map<size_t, UnitResult> ready;  // tokenised, not yet written
  size_t written = 0;                  // units appended to the shards
  int running = workers;
  size_t error_unit = n;
  Status error;
  auto fail = [&](size_t i, const Status& st) {
    std::lock_guard<std::mutex> lock(mu);
    if (i < error_unit) {
      error_unit = i;
      error = st;
    }
    failed = true;
  };
  auto halted = [&] { return failed.load() || (stop && stop->load()); };
  uint64_t bytes_total = 0;
  for (const Unit& u : job.units) bytes_total += u.end - u.begin;
  auto work = [&] {
    for (;;) {
      if (halted()) break;
      const size_t i = next.fetch_add(1);
      if (i >= n) break;
      {
        std::unique_lock<std::mutex> lock(mu);
        while (i >= written + window && !halted()) cv.wait_for(lock, std::chrono::milliseconds(100));
      }
      if (halted()) break;
      const Unit& u = job.units[i];
      const std::string part = PartPath(o.output_dir, i);
      Result<UnitResult> r = Status::NotFound("");
      bool resumed = false;
      if (FileExists(part)) {
        r = ReadPart(part, job.plan, i, width, tok->vocab_size());
        resumed = r.ok();
      }
      if (!resumed) {
        r = Tokenise(job, u);
        if (r.ok()) {
          const Status st = WritePart(part, SerializePart(job.plan, i, *r, width));
          if (!st.ok()) r = st;
        }
      }
      if (!r.ok()) {
        fail(i, r.status());
        break;
      }
      unit_tokens[i] = static_cast<int64_t>(r->tokens.size());
      unit_documents[i] = r->documents;
      bytes_done += u.end - u.begin;
      if (resumed) {
        ++units_resumed;
      } else {
        tokens_done += static_cast<int64_t>(r->tokens.size());
        bytes_new += u.end - u.begin;
      }
      ++units_done;
      {
        std::lock_guard<std::mutex> lock(mu);
        ready.emplace(i, std::move(*r));
      }
      cv.notify_all();
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      --running;
    }
    cv.notify_all();
  };
  const auto tokenise_start = Clock::now();
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) threads.emplace_back(work);
  auto snapshot = [&] {
    PrepareProgress p;
    p.units_done = units_done.load();
    p.units_total = static_cast<int64_t>(n);
    p.units_resumed = units_resumed.load();
    p.bytes_done = bytes_done.load();
    p.bytes_total = bytes_total;
    p.tokens_done = tokens_done.load();
    p.seconds = since(tokenise_start);
    return p;
  };
  auto last = Clock::now();
  for (;;) {
    std::optional<UnitResult> take;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return ready.count(written) || running == 0; });
      if (auto it = ready.find(written); it != ready.end() && !failed) {
        take = std::move(it->second);
        ready.erase(it);
      } else if (running == 0) {
        break;
      }
    }
    if (take) {
      if (Status st = writer.Append(take->tokens); !st.ok()) {
        fail(written, st);
      } else {
        std::lock_guard<std::mutex> lock(mu);
        ++written;
      }
      cv.notify_all();
    }
    if (progress && since(last) >= progress_period_seconds) {
      progress(snapshot());
      last = Clock::now();
    }
  }
  for (std::thread& t : threads) t.join();
  const bool complete = !failed && written == n;
  if (progress && complete) progress(snapshot());
  report.tokenise_seconds = since(tokenise_start);
  report.units_resumed = units_resumed.load();
  report.tokens_tokenised = tokens_done.load();
  report.bytes_tokenised = bytes_new.load();
  if (failed) return error;
  if (!complete)
    return Status::Cancelled(fmt::format("interrupted: {} of {} chunks done, kept in {}: run the same command again "
                                         "to resume",
                                         units_done.load(), n, (fs::path(o.output_dir) / kWorkDir).string()));
  ELASTRAIN_RETURN_IF_ERROR(writer.Finish());

  PreparedManifest& m = report.manifest;
  m.plan = plan_hex;
  m.tokenizer_id = tok->id();
  m.tokenizer_type = TokenizerTypeOf(*tok);
  m.tokenizer_path = o.tokenizer_path.empty() ? "" : fs::absolute(o.tokenizer_path).lexically_normal().string();
  m.vocab_size = tok->vocab_size();
  if (job.doc_token) {
    m.document_token = doc_name;
    m.document_token_id = *job.doc_token;
  }
  m.text_field = format == DatasetType::kJsonl ? o.text_field : "";
  for (const Input& in : job.inputs) {
    PreparedInput pi;
    pi.path = in.path;
    pi.format = std::string(DatasetTypeName(in.format));
    pi.bytes = in.map->size();
    pi.hash = in.hash;
    m.inputs.push_back(std::move(pi));
  }
  for (size_t i = 0; i < job.units.size(); ++i) {
    PreparedInput& pi = m.inputs[job.units[i].input];
    pi.documents += unit_documents[i];
    pi.tokens += unit_tokens[i];
    m.documents += unit_documents[i];
    m.tokens += unit_tokens[i];
    m.bytes += job.units[i].end - job.units[i].begin;
  }
  if (m.tokens == 0) return Status::InvalidArgument("the inputs hold no text: no tokens to write");
  m.llmc_version = width == 2 ? 1 : 2;
  for (const WrittenShard& w : writer.shards()) m.shards.push_back({w.file, w.tokens, w.hash});
  m.seconds = since(start);
  ELASTRAIN_RETURN_IF_ERROR(
      WriteFileAtomic((fs::path(o.output_dir) / kPreparedManifestName).string(), PreparedManifestJson(m)));
  std::error_code ec;
  fs::remove_all(fs::path(o.output_dir) / kWorkDir, ec);
  report.seconds = since(start);
  return report;
}

}  // namespace elastrain
