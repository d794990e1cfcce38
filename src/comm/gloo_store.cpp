// MakeGlooStore (comm/rendezvous_store.h): Gloo's rendezvous::Store over a Store, so that
// ProcessGroup::Connect meets its peers through etcd in cluster mode; the adapter throws
// gloo::IoException on a store error, as Gloo expects.
#include <gloo/common/error.h>
#include <gloo/rendezvous/store.h>

#include <algorithm>
#include <thread>

#include "comm/rendezvous_store.h"

namespace elastrain {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string Join(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

class GlooStore : public gloo::rendezvous::Store {
 public:
  GlooStore(std::shared_ptr<elastrain::Store> store, std::string prefix, StoreOptions opt)
      : store_(std::move(store)), prefix_(std::move(prefix)), opt_(opt) {}

  // Overwriting is allowed (a plain Put); Gloo never sets a key twice in one group.
  void set(const std::string& key, const std::vector<char>& data) override {
    auto rev = store_->Put(Key(key), std::string(data.begin(), data.end()));
    if (!rev.ok()) GLOO_THROW_IO_EXCEPTION("rendezvous set of key ", Key(key), ": ", rev.status().ToString());
  }

  std::vector<char> get(const std::string& key) override {
    std::optional<KeyValue> kv = Await({key}, kDefaultTimeout);
    return std::vector<char>(kv->value.begin(), kv->value.end());
  }

  void wait(const std::vector<std::string>& keys) override { wait(keys, kDefaultTimeout); }
  void wait(const std::vector<std::string>& keys, const milliseconds& timeout) override { Await(keys, timeout); }

 private:
  std::string Key(const std::string& key) const {
    if (prefix_.empty()) return key;
    const bool slash_end = prefix_.back() == '/';
    const bool slash_start = !key.empty() && key.front() == '/';
    if (slash_end && slash_start) return prefix_ + key.substr(1);
    return slash_end || slash_start ? prefix_ + key : prefix_ + "/" + key;
  }

  // Polls until every key exists, with a pause growing from 1 ms to poll_interval (a
  // rendezvous usually completes within milliseconds; a slow peer should not cost a
  // request per millisecond). Returns the last key's entry; throws at the timeout.
  std::optional<KeyValue> Await(const std::vector<std::string>& keys, milliseconds timeout) {
    // Gloo reads a zero timeout as "wait forever"; every wait here is bounded instead.
    if (timeout <= milliseconds(0)) timeout = kDefaultTimeout;
    const auto deadline = Clock::now() + timeout;
    auto pause = milliseconds(1);
    size_t found = 0;  // keys[0, found) exist; a rendezvous key is never deleted
    std::optional<KeyValue> last;
    for (;;) {
      while (found < keys.size()) {
        auto kv = store_->Get(Key(keys[found]));
        if (!kv.ok())
          GLOO_THROW_IO_EXCEPTION("rendezvous wait for key ", Key(keys[found]), ": ", kv.status().ToString());
        if (!kv->has_value()) break;
        last = std::move(*kv);
        ++found;
      }
      if (found == keys.size()) return last;
      const auto now = Clock::now();
      if (now >= deadline) {
        std::vector<std::string> missing;
        for (size_t i = found; i < keys.size(); ++i) missing.push_back(Key(keys[i]));
        GLOO_THROW_IO_EXCEPTION("Wait timeout for key(s): ", Join(missing), " after ", timeout.count(),
                                " ms in store ", store_->url());
      }
      std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
      pause = std::min(pause * 2, std::max(opt_.poll_interval, milliseconds(1)));
    }
  }

  const std::shared_ptr<elastrain::Store> store_;
  const std::string prefix_;
  const StoreOptions opt_;
};

}  // namespace

std::shared_ptr<gloo::rendezvous::Store> MakeGlooStore(std::shared_ptr<Store> store, std::string prefix,
                                                       const StoreOptions& opt) {
  return std::make_shared<GlooStore>(std::move(store), std::move(prefix), opt);
}

}  // namespace elastrain
