#include "elastic/leadership.h"

#include <unistd.h>

#include <thread>

#include <fmt/format.h>

#include "common/clock.h"
#include "common/log.h"

namespace elastrain {

std::string DefaultHeadId() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return fmt::format("{}:{}", host[0] ? host : "head", ::getpid());
}

Leadership::Leadership(std::shared_ptr<Store> store, HeadRecord me, std::chrono::milliseconds ttl)
    : store_(std::move(store)), me_(std::move(me)), ttl_(ttl) {}

Leadership::~Leadership() {
  if (lease_) (void)store_->RevokeLease(lease_);
}

Result<double> Leadership::Acquire(const std::atomic<bool>& stop) {
  if (held() && Keep().ok()) return 0.0;
  const auto start = Clock::now();
  bool waited = false;
  while (!stop) {
    const auto sent = Clock::now();
    ELASTRAIN_ASSIGN_OR_RETURN(LeaseId lease, store_->GrantLease(ttl_));
    HeadRecord rec = me_;
    rec.since = WallSeconds();
    ELASTRAIN_ASSIGN_OR_RETURN(bool won, store_->CompareAndSwap(keys::Head(), 0, ToJson(rec), lease));
    if (won) {
      auto kv = store_->Get(keys::Head());
      if (kv.ok() && kv->has_value() && (*kv)->lease == lease) {
        lease_ = lease;
        revision_ = (*kv)->mod_revision;
        renewed_ = sent;
        me_.since = rec.since;
        const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
        if (waited) LOG_INFO("controller: took the lead as head {} after {:.1f} s", me_.id, seconds);
        return seconds;
      }
    }
    (void)store_->RevokeLease(lease);
    if (!waited) {
      auto holder = ReadRecord<HeadRecord>(*store_, keys::Head());
      LOG_INFO("controller: head {} leads; {} stands by until its lease ends",
               holder.ok() && holder->has_value() ? (*holder)->id : std::string("(another)"), me_.id);
    }
    waited = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return Status::Unavailable("controller: stopped while standing by for the lead");
}

Status Leadership::Lost(const std::string& why) {
  LOG_WARN("controller: head {} {}: {}; it decides nothing more and stands by", me_.id, kLostLead, why);
  if (lease_) (void)store_->RevokeLease(lease_);  // its key goes now if the store hears it
  lease_ = 0;
  revision_ = 0;
  return Status::FailedPrecondition(std::string(kLostLead) + ": " + why);
}

Status Leadership::Keep() {
  if (!held()) return Status::FailedPrecondition(std::string(kLostLead) + ": not leading");
  const auto now = Clock::now();
  if (now - renewed_ < ttl_ / 3) return Status::OK();
  Status st = store_->KeepAlive(lease_);
  if (st.ok()) {
    renewed_ = now;
    return Status::OK();
  }
  if (st.code() == StatusCode::kNotFound) return Lost("its lease ended (" + st.message() + ")");
  if (Clock::now() - renewed_ >= ttl_)
    return Lost(fmt::format("no renewal got through for {} ms, the lease's length ({})", ttl_.count(), st.message()));
  LOG_WARN("controller: cannot renew the head lease ({}); retrying within the lease", st.message());
  return Status::OK();
}

Status Leadership::Verify() {
  ELASTRAIN_RETURN_IF_ERROR(Keep());
  auto kv = store_->Get(keys::Head());
  if (!kv.ok()) return kv.status();
  if (!kv->has_value() || (*kv)->mod_revision != revision_ || (*kv)->lease != lease_)
    return Lost(kv->has_value() ? "another head holds " + keys::Head() : keys::Head() + " is gone");
  return Status::OK();
}

}  // namespace elastrain
