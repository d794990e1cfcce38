// Request hygiene of the control API (monitor/job_api.h), as pure functions: which Host
// headers the server answers, and which POST bodies it reads.
//
// The Host check stops DNS rebinding: a web page whose name an attacker re-points to
// 127.0.0.1 makes the victim's browser send requests with the attacker's name in Host.
// The server answers only the names it was bound to: host:port of its bind address,
// plus localhost:port when that is a loopback address, plus names the user adds
// (--allowed-host, dashboard_allowed_hosts; e.g. the name of a proxy in front of it).
// For a wildcard bind (0.0.0.0, ::) the caller adds the machine's addresses and name.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace elastrain {

// Request bodies above this are answered 413 (a config is a few KiB).
inline constexpr size_t kMaxRequestBodyBytes = 1 << 20;
// A refused body up to this size that the client sends without waiting for "100 Continue"
// is read and discarded before the 413 goes out: closing a socket with unread input
// resets the connection, and the client may never see the answer. Larger ones are
// refused unread (their sender pays a reset).
inline constexpr size_t kMaxDrainedBodyBytes = 16 << 20;

// True for 127.0.0.0/8, ::1 and "localhost".
bool IsLoopbackHost(std::string_view host);
// True for "0.0.0.0", "::" and "" (every address).
bool IsWildcardHost(std::string_view host);

// The Host header values a server bound to `bind_host`:`port` answers: "name:port" for
// the bind address and each of `names` ("[addr]:port" for IPv6), "localhost:port" for a
// loopback bind, and also the bare name when `port` is the scheme's default
// (`default_port`: 80 or 443). A name already holding a port ("proxy:8443") is kept as
// it is. Lower case.
std::vector<std::string> AllowedHostHeaders(const std::string& bind_host, int port, int default_port,
                                            const std::vector<std::string>& names);
// `host` (a request's Host header) is one of `allowed`, ignoring case.
bool HostHeaderAllowed(std::string_view host, const std::vector<std::string>& allowed);

// "application/json", optionally with parameters ("; charset=utf-8"), ignoring case.
bool IsJsonContentType(std::string_view content_type);

}  // namespace elastrain
