// The bearer tokens of the control API, and where the CLI may send them.
//
// A token is 32 random bytes as 64 hex digits in a file of its own:
//   <run_dir>/token                 an embedded `elastrain train` run's token
//   $HOME/.elastrain/head_token     an `elastrain head`'s token (or --token-file PATH)
// and the API's URL is recorded beside it, in the same directory, as `head_url`
// (UrlFileBeside): a token is only ever sent to the URL recorded next to it.
//
// Trust rule (ReadTokenFile): a token file is used only when it is a regular file (not
// a symlink, FIFO or device; opened with O_NOFOLLOW and checked with fstat on the open
// descriptor, so there is no check-then-open race), owned by the effective user, with
// mode exactly 0600, holding 64 hex digits (and an optional newline). Anything else is
// refused with an error naming the file, what it is and the fix; such a file is never
// adopted, rewritten or removed.
//
// Creation (EnsureTokenFile): a temporary file is created beside the target with
// O_CREAT|O_EXCL|O_NOFOLLOW and mode 0600 (fchmod, whatever the umask), written and
// fsynced, then link()ed to the target name, which fails if any file (or symlink) of
// that name exists; so a reader sees no file or the whole token, and two processes
// racing keep one token. Thread-safe; the functions hold no state.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace elastrain {

inline constexpr char kTokenFileName[] = "token";            // in a run directory
inline constexpr char kHeadTokenFileName[] = "head_token";   // of an `elastrain head`
inline constexpr char kHeadUrlFileName[] = "head_url";       // beside either token
inline constexpr size_t kTokenBytes = 32;                    // 64 hex digits

// The token in `path` if the file passes the trust rule above; NotFound when there is no
// such file, InvalidArgument naming the file and the fix when it is not trusted.
Result<std::string> ReadTokenFile(const std::string& path);
// ReadTokenFile, or a new token file at `path` when there is none. The directory must
// exist. Never replaces or changes an existing file.
Result<std::string> EnsureTokenFile(const std::string& path);

// <run_dir>/token: EnsureTokenFile after creating run_dir (mkdir -p).
Result<std::string> EnsureRunToken(const std::string& run_dir);
// <run_dir>/token: ReadTokenFile.
Result<std::string> ReadRunToken(const std::string& run_dir);

// $HOME/.elastrain/head_token (the password database's home when HOME is unset).
std::string DefaultHeadTokenPath();
// $HOME/.elastrain/head_signing_key: the head's Ed25519 key (store/signed_records.h).
std::string DefaultHeadSigningKeyPath();
// EnsureTokenFile(path) after creating its directory with mode 0700 when missing.
Result<std::string> EnsureHeadToken(const std::string& path);

// The file that records the API URL a token belongs to: `head_url` in the token file's
// directory.
std::string UrlFileBeside(const std::string& token_path);
// Records `url` in `path`, atomically and with mode kUrlFileMode whatever the umask, from
// its creation on: never readable by others, not even between its write and a chmod
// (ReadUrlFile refuses a file others may write).
inline constexpr unsigned kUrlFileMode = 0600;
Status WriteUrlFile(const std::string& path, const std::string& url);
// The URL recorded in `path` (one line); NotFound naming the file when there is none,
// InvalidArgument when it is a link, not ours, or writable by group or others.
Result<std::string> ReadUrlFile(const std::string& path);
// Removes `path` if it still records `url` (a server on its way out).
void RemoveUrlFile(const std::string& path, const std::string& url);

// `authorization` is the request's Authorization header ("Bearer <token>"); compared in
// constant time (for a given length). False for an empty token.
bool BearerMatches(std::string_view authorization, std::string_view token);

}  // namespace elastrain
