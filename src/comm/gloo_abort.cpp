// Gloo's TCP pair can wake the operations pending on it (Pair::signalExceptionExternal:
// what its own buffers call on a timeout), but Debian's libgloo-dev (2022) cannot compile
// gloo/transport/tcp/pair.h: it includes gloo/common/memory.h, which the package does
// not ship. So this file declares just that one member function, with the signature
// libgloo.so exports (`nm -DC libgloo.so | grep signalExceptionExternal`), and calls it
// on a pair whose dynamic type is checked to be tcp::Pair. tcp::Pair's primary base is
// transport::Pair, so both pointers are the same address. The declaration is the only
// thing of tcp::Pair this file uses; nothing else may include it.
#include "comm/gloo_abort.h"

#include <exception>
#include <cstring>
#include <typeinfo>

#include <gloo/transport/pair.h>

namespace gloo::transport::tcp {
class Pair {
 public:
  std::exception_ptr signalExceptionExternal(const std::string& msg);
};
}  // namespace gloo::transport::tcp

namespace elastrain {

bool FailGlooPair(gloo::transport::Pair* pair, const std::string& why) {
  if (pair == nullptr) return false;
  // The mangled name of gloo::transport::tcp::Pair, as typeid reports it.
  if (std::strcmp(typeid(*pair).name(), "N4gloo9transport3tcp4PairE") != 0) return false;
  (void)reinterpret_cast<gloo::transport::tcp::Pair*>(pair)->signalExceptionExternal(why);
  return true;
}

}  // namespace elastrain
