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

#include <optional>
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

// `text` made safe for a log line: a byte outside printable ASCII as \xHH (an escape
// sequence "\x1b[2J" cannot drive the reader's terminal; bytes 0x80-0xff too, as some
// terminals take 0x9b for CSI), a backslash as "\\"; at most `max_bytes` of the input,
// then "..." (the escaped text is at most 4 times as long).
std::string EscapeForLog(std::string_view text, size_t max_bytes = 200);

// The raw bytes of a request as they arrive (monitor/http_gate.h reads them before
// httplib parses them): the offset just past the blank line ending its head ("\r\n\r\n",
// or "\n\n"), or npos while the head is incomplete.
size_t RequestHeadEnd(std::string_view buffer);
// The first line of a raw request, without its line end (for logging a request that does
// not parse).
std::string_view RequestLine(std::string_view buffer);
// The value of header `name` (case-insensitive, first occurrence) in a raw request head,
// trimmed; nullopt when absent.
std::optional<std::string_view> RawHeaderValue(std::string_view head, std::string_view name);

// "application/json", optionally with parameters ("; charset=utf-8"), ignoring case.
bool IsJsonContentType(std::string_view content_type);

}  // namespace elastrain
