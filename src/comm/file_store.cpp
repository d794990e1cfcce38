// MakeFileStore (comm/rendezvous_store.h): the embedded mode's rendezvous store, Gloo's
// FileStore with a finer wait.
#include <gloo/common/error.h>
#include <gloo/rendezvous/file_store.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>

#include "comm/rendezvous_store.h"
#include "common/files.h"

namespace elastrain {

namespace {

// Gloo's FileStore::wait sleeps a whole second between looks, which would make every
// rendezvous (one per generation and group) cost up to a second and round every timeout
// up to whole seconds. This polls with a short, growing interval instead; set/get and the
// on-disk format (one file per key, written to a temp name and renamed) stay Gloo's.
// Gloo's FileStore is not thread-safe (set() appends to a member vector), and several
// threads of one process may connect groups at once, so every call into it takes mu_.
class PollingFileStore : public gloo::rendezvous::FileStore {
 public:
  explicit PollingFileStore(const std::string& dir) : FileStore(dir) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    FileStore::set(key, data);
  }
  std::vector<char> get(const std::string& key) override {
    wait({key}, kDefaultTimeout);
    std::lock_guard<std::recursive_mutex> lock(mu_);
    return FileStore::get(key);
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, kDefaultTimeout); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto pause = std::chrono::milliseconds(1);
    while (!Check(keys)) {
      if (std::chrono::steady_clock::now() >= deadline) {
        std::string names;
        for (const auto& k : keys) names += (names.empty() ? "" : ", ") + k;
        GLOO_THROW_IO_EXCEPTION("Wait timeout for key(s): ", names, " after ", timeout.count(),
                                " ms in file store ", basePath_);
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(20));
    }
  }

 private:
  bool Check(const std::vector<std::string>& keys) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    return check(keys);
  }
  // Recursive: FileStore::get calls the virtual wait(), which locks again.
  std::recursive_mutex mu_;  // serialises calls into FileStore
};

}  // namespace

Result<std::shared_ptr<gloo::rendezvous::Store>> MakeFileStore(const std::string& dir) {
  ELASTRAIN_RETURN_IF_ERROR(MakeDirs(dir));
  try {
    return std::shared_ptr<gloo::rendezvous::Store>(std::make_shared<PollingFileStore>(dir));
  } catch (const std::exception& e) {
    return Status::IOError("cannot open rendezvous file store '" + dir + "': " + e.what());
  }
}

}  // namespace elastrain
