#include "ckpt/safetensors.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <xxhash.h>

#include "common/checked_math.h"
#include "common/fault.h"
#include "common/files.h"
#include "common/safe_path.h"

namespace elastrain::ckpt {

// Data is written straight from the caller's floats; safetensors is little-endian.
static_assert(std::endian::native == std::endian::little, "checkpoint I/O assumes a little-endian host");

namespace {
constexpr int64_t kMaxHeaderBytes = 1LL << 30;  // a sane bound before allocating
std::string Errno() { return std::strerror(errno); }

}  // namespace

Status PreadAll(int fd, void* buf, size_t n, int64_t offset, const std::string& path) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t r = ::pread(fd, p, n, offset);
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::IOError(fmt::format("{}: read at byte {} failed ({})", path, offset, Errno()));
    }
    if (r == 0) return Status::Corruption(fmt::format("{}: truncated: end of file at byte {}", path, offset));
    p += r;
    n -= static_cast<size_t>(r);
    offset += r;
  }
  return Status::OK();
}

const SafetensorsEntry* SafetensorsHeader::Find(const std::string& key) const {
  for (const SafetensorsEntry& e : entries)
    if (e.key == key) return &e;
  return nullptr;
}

namespace {
// Bytes per element of the safetensors dtypes (the format's full list); 0: unknown.
int64_t DtypeBytes(const std::string& dtype) {
  static const std::pair<const char*, int64_t> kSizes[] = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},
      {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1},   {"BOOL", 1}, {"F8_E5M2", 1}, {"F8_E4M3", 1}};
  for (const auto& [name, bytes] : kSizes)
    if (dtype == name) return bytes;
  return 0;
}
}  // namespace

Result<SafetensorsHeader> ReadSafetensorsHeader(const std::string& path) {
  auto opened = OpenFile(path, O_RDONLY);  // not through a link (common/safe_path.h)
  if (!opened.ok()) return Status::NotFound(opened.status().message());
  const int fd = opened->release();
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string why = Errno();
    ::close(fd);
    return Status::IOError(fmt::format("{}: cannot stat ({})", path, why));
  }
  const int64_t file_size = st.st_size;
  uint64_t len = 0;
  Status s = file_size < 8 ? Status::Corruption(fmt::format("{}: {} bytes, shorter than the 8-byte header length "
                                                            "(not a safetensors file)", path, file_size))
                           : PreadAll(fd, &len, 8, 0, path);
  std::string text;
  // Compared as unsigned: a length of 2^63 or more must not turn negative and pass.
  if (s.ok() && (len == 0 || len > static_cast<uint64_t>(std::min(kMaxHeaderBytes, file_size - 8))))
    s = Status::Corruption(fmt::format("{}: header length {} does not fit the file ({} bytes; at most {} allowed)",
                                       path, len, file_size, kMaxHeaderBytes));
  if (s.ok()) {
    text.resize(len);
    s = PreadAll(fd, text.data(), len, 8, path);
  }
  ::close(fd);
  ELASTRAIN_RETURN_IF_ERROR(s);
  auto bad = [&](const std::string& what) { return Status::Corruption(fmt::format("{}: safetensors header: {}", path, what)); };
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return bad("not a JSON object");
  SafetensorsHeader h;
  h.data_start = 8 + static_cast<int64_t>(len);  // len <= kMaxHeaderBytes
  const int64_t data_bytes = file_size - h.data_start;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const nlohmann::json& v = it.value();
    if (it.key() == "__metadata__") {
      if (!v.is_object()) return bad("__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m)
        if (m.value().is_string()) h.metadata[m.key()] = m.value().get<std::string>();
      continue;
    }
    if (!v.is_object() || !v.contains("dtype") || !v["dtype"].is_string() || !v.contains("shape") ||
        !v["shape"].is_array() || !v.contains("data_offsets") || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2)
      return bad(fmt::format("tensor '{}' needs dtype, shape and data_offsets [begin, end]", it.key()));
    SafetensorsEntry e;
    e.key = it.key();
    e.dtype = v["dtype"].get<std::string>();
    const int64_t elem_bytes = DtypeBytes(e.dtype);
    if (elem_bytes == 0) return bad(fmt::format("tensor '{}': unknown dtype '{}'", e.key, e.dtype));
    for (const auto& d : v["shape"]) {
      // is_number_unsigned values above INT64_MAX would wrap in get<int64_t>.
      if (!d.is_number_integer() || (d.is_number_unsigned() && d.get<uint64_t>() > INT64_MAX) || d.get<int64_t>() < 0)
        return bad(fmt::format("tensor '{}': shape {} must hold integers in [0, 2^63)", e.key, v["shape"].dump()));
      e.shape.push_back(d.get<int64_t>());
    }
    const nlohmann::json &b = v["data_offsets"][0], &en = v["data_offsets"][1];
    auto int64_ok = [](const nlohmann::json& x) {
      return x.is_number_integer() && !(x.is_number_unsigned() && x.get<uint64_t>() > INT64_MAX);
    };
    if (!int64_ok(b) || !int64_ok(en))
      return bad(fmt::format("tensor '{}': data_offsets {} must be integers in [0, 2^63)", e.key, v["data_offsets"].dump()));
    e.begin = b.get<int64_t>();
    e.end = en.get<int64_t>();
    // Relative to the data start, so no addition that could overflow.
    if (e.begin < 0 || e.end < e.begin || e.end > data_bytes)
      return bad(fmt::format("tensor '{}': data_offsets [{}, {}] outside the {} data bytes (file truncated?)", e.key,
                             e.begin, e.end, data_bytes));
    Result<int64_t> numel = CheckedProduct(e.shape, fmt::format("tensor '{}' shape element count", e.key));
    Result<int64_t> bytes = numel.ok() ? CheckedMul(*numel, elem_bytes, fmt::format("tensor '{}' bytes", e.key))
                                       : Result<int64_t>(numel.status());
    if (!bytes.ok()) return bad(bytes.status().message());
    if (e.end - e.begin != *bytes)
      return bad(fmt::format("tensor '{}': data_offsets [{}, {}] hold {} bytes, but {} {} needs {}", e.key, e.begin,
                             e.end, e.end - e.begin, e.dtype, v["shape"].dump(), *bytes));
    h.entries.push_back(std::move(e));
  }
  std::sort(h.entries.begin(), h.entries.end(), [](const auto& a, const auto& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < h.entries.size(); ++i)
    if (h.entries[i].begin < h.entries[i - 1].end)
      return bad(fmt::format("tensors '{}' and '{}' overlap", h.entries[i - 1].key, h.entries[i].key));
  return h;
}

namespace {
// The header of `entries`: its JSON text, padded with spaces (allowed by the format)
// so that the data starts kIoAlign-aligned (8 + length), and each entry's byte offset
// and size within the data.
Result<std::string> HeaderText(const std::string& path, const std::vector<SafetensorsWriter::Entry>& entries,
                               const std::map<std::string, std::string>& metadata, std::vector<int64_t>* offsets,
                               std::vector<int64_t>* sizes) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> keys;
  int64_t offset = 0;
  for (const SafetensorsWriter::Entry& e : entries) {
    if (!keys.insert(e.key).second || e.key == "__metadata__")
      return Status::InvalidArgument(fmt::format("{}: tensor key '{}' is not unique", path, e.key));
    ELASTRAIN_ASSIGN_OR_RETURN(const int64_t numel,
                               CheckedProduct(e.shape, fmt::format("{}: tensor '{}' element count", path, e.key)));
    ELASTRAIN_ASSIGN_OR_RETURN(const int64_t bytes, CheckedMul(numel, 4, fmt::format("{}: tensor '{}' bytes", path, e.key)));
    ELASTRAIN_ASSIGN_OR_RETURN(const int64_t next, CheckedAdd(offset, bytes, fmt::format("{}: data size", path)));
    header[e.key] = {{"dtype", "F32"}, {"shape", e.shape}, {"data_offsets", {offset, next}}};
    offsets->push_back(offset);
    sizes->push_back(bytes);
    offset = next;
  }
  std::string text = header.dump();
  text.append(static_cast<size_t>(RoundUpToIoAlign(8 + text.size()) - 8 - text.size()), ' ');
  return text;
}

// A rename is durable only once the directory entry is: fsyncs the directory of `path`.
Status FsyncParentDirectory(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0 || ::fsync(dfd) != 0) {
    if (dfd >= 0) ::close(dfd);
    return Status::IOError(fmt::format("{}: fsync of directory '{}' failed ({})", path, dir, Errno()));
  }
  ::close(dfd);
  return Status::OK();
}
}  // namespace

Result<std::unique_ptr<SafetensorsWriter>> SafetensorsWriter::Create(
    const std::string& path, const std::vector<Entry>& entries, const std::map<std::string, std::string>& metadata) {
  std::unique_ptr<SafetensorsWriter> w(new SafetensorsWriter());
  w->path_ = path;
  w->tmp_ = path + ".tmp";
  ELASTRAIN_ASSIGN_OR_RETURN(const std::string text, HeaderText(path, entries, metadata, &w->offsets_, &w->sizes_));
  const uint64_t len = text.size();
  w->data_start_ = 8 + static_cast<int64_t>(len);
  // A fresh file, never one (or a link) found under the temporary name.
  ::unlink(w->tmp_.c_str());
  auto opened = OpenFile(w->tmp_, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
  if (!opened.ok()) return Status::IOError(fmt::format("cannot create: {}", opened.status().message()));
  w->fd_ = opened->release();
  TryEnableDirectIo(w->fd_);  // else the same blocks through the page cache
  w->block_ = AllocateAligned(kIoBlockBytes);
  w->hash_ = XXH3_createState();
  if (w->hash_ == nullptr) return w->Fail(Status::Internal(fmt::format("{}: cannot allocate a hash state", path)));
  Status s = w->Put(reinterpret_cast<const char*>(&len), 8, nullptr);
  if (s.ok()) s = w->Put(text.data(), static_cast<int64_t>(text.size()), nullptr);
  if (!s.ok()) return w->Fail(s);
  return w;
}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ >= 0) Fail(Status::OK()).ok();
  XXH3_freeState(hash_);
}

Status SafetensorsWriter::Fail(Status st) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
  return st;
}

Status SafetensorsWriter::WriteBlock() {
  ELASTRAIN_ASSIGN_OR_RETURN(const int64_t wrote, WriteBlockAt(fd_, block_.get(), used_, file_bytes_, tmp_));
  padded_ = wrote > used_;
  file_bytes_ += used_;
  used_ = 0;
  return Status::OK();
}

Status SafetensorsWriter::Put(const char* src, int64_t n, XXH3_state_s* hash) {
  // Hashed in slices that are still in the L2 cache from their copy.
  constexpr int64_t kSlice = int64_t{256} << 10;
  while (n > 0) {
    // Data whose address is aligned as its place in the file is (the trainer's snapshot
    // lays the pieces out so) goes to the disk from where it is, with no copy: from the
    // next aligned byte on, after what is staged in the block. The few bytes up to that
    // byte are copied into the block, and both go in one write.
    const int64_t misaligned = static_cast<int64_t>(reinterpret_cast<uintptr_t>(src) % kIoAlign);
    const bool congruent = misaligned == used_ % kIoAlign;
    if (hash != nullptr && congruent && misaligned == 0 && n >= kIoAlign && HasDirectIo(fd_)) {
      const int64_t len = std::min(kIoBlockBytes, n / kIoAlign * kIoAlign);
      for (int64_t at = 0; at < len; at += kSlice)
        XXH3_64bits_update(hash, src + at, static_cast<size_t>(std::min(kSlice, len - at)));
      ELASTRAIN_RETURN_IF_ERROR(WriteAlignedAt(fd_, block_.get(), used_, src, len, file_bytes_, tmp_));
      padded_ = false;
      file_bytes_ += used_ + len;
      used_ = 0;
      src += len;
      n -= len;
      continue;
    }
    int64_t len = std::min({n, kIoBlockBytes - used_, kSlice});
    if (hash != nullptr && congruent && misaligned != 0) len = std::min(len, kIoAlign - misaligned);
    char* at = block_.get() + used_;
    std::memcpy(at, src, static_cast<size_t>(len));
    if (hash != nullptr) XXH3_64bits_update(hash, at, static_cast<size_t>(len));
    used_ += len;
    src += len;
    n -= len;
    if (used_ == kIoBlockBytes) ELASTRAIN_RETURN_IF_ERROR(WriteBlock());
  }
  return Status::OK();
}

Result<uint64_t> SafetensorsWriter::Append(const float* data, int64_t n) {
  if (fd_ < 0) return Status::FailedPrecondition(fmt::format("{}: writer already finished or failed", path_));
  if (next_ >= sizes_.size() || n < 0 || n > sizes_[next_] / 4 || n * 4 != sizes_[next_])
    return Fail(Status::InvalidArgument(fmt::format("{}: entry {} given {} floats, header says {}", path_, next_, n,
                                                    next_ < sizes_.size() ? sizes_[next_] / 4 : 0)));
  if (fault::Fires(fault::Point::kFailWrite, {.path = path_})) {
    WriteBlock().ok();  // part of the file on disk, as a full disk leaves it; removed below
    return Fail(Status::IOError(fmt::format("{}: write failed (No space left on device; injected by fault fail_write)",
                                            tmp_)));
  }
  XXH3_64bits_reset_withSeed(hash_, 0);  // Hash64's seed
  Status ws = Put(reinterpret_cast<const char*>(data), n * 4, hash_);
  if (!ws.ok()) return Fail(ws);
  ++next_;
  written_ += n * 4;
  return XXH3_64bits_digest(hash_);
}

Result<int64_t> SafetensorsWriter::Finish() {
  if (fd_ < 0) return Status::FailedPrecondition(fmt::format("{}: writer already finished or failed", path_));
  if (next_ != sizes_.size())
    return Fail(Status::Internal(fmt::format("{}: {} of {} entries written", path_, next_, sizes_.size())));
  if (used_ > 0) {
    Status ws = WriteBlock();
    if (!ws.ok()) return Fail(ws);
  }
  const int64_t size = data_start_ + written_;
  // A direct write ends on a block boundary: cut the zeros past the true end.
  if (padded_ && ::ftruncate(fd_, size) != 0)
    return Fail(Status::IOError(fmt::format("{}: truncate to {} bytes failed ({})", tmp_, size, Errno())));
  // The data and the size reach the disk before the rename makes the file visible.
  if (::fdatasync(fd_) != 0) return Fail(Status::IOError(fmt::format("{}: fdatasync failed ({})", tmp_, Errno())));
  if (::close(fd_) != 0) {
    fd_ = -1;
    ::unlink(tmp_.c_str());
    return Status::IOError(fmt::format("{}: close failed ({})", tmp_, Errno()));
  }
  fd_ = -1;
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    Status st = Status::IOError(fmt::format("{}: rename from {} failed ({})", path_, tmp_, Errno()));
    ::unlink(tmp_.c_str());
    return st;
  }
  ELASTRAIN_RETURN_IF_ERROR(FsyncParentDirectory(path_));
  return size;
}

}  // namespace elastrain::ckpt
