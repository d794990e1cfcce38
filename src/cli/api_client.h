// How the job commands (submit, status, stop, chaos) reach the control API, and with
// which token. The rule: a token is only ever sent to the URL its owner recorded beside
// it, or to a --head the user named for a token the user gave.
//   --run-dir DIR         URL from DIR/head_url, token DIR/token (a --head that differs
//                         is refused, naming both; --token-file is refused)
//   --head URL            token from --token-file PATH, else $ELASTRAIN_TOKEN, else the
//                         default head token when the head_url beside it is URL
//   --head URL1,URL2,...  several heads of one cluster (any answers; docs/cluster.md):
//                         tried in turn until one answers; the token from --token-file
//                         or $ELASTRAIN_TOKEN only
//   neither               the default head: $HOME/.elastrain/head_url and head_token
// Token files must pass the trust rule of jobctl/run_token.h. HTTPS servers are verified
// against the system's CAs or --ca-cert / $ELASTRAIN_CA_CERT; never unverified.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "wire/job_status.h"

namespace elastrain {

struct ApiTargetArgs {
  std::string head;                // --head URL; "" when not given
  std::string run_dir;             // --run-dir DIR; ""
  std::string token_file;          // --token-file PATH; ""
  std::string env_token;           // $ELASTRAIN_TOKEN; ""
  std::string default_token_file;  // DefaultHeadTokenPath()
};

struct ApiTarget {
  std::string url;           // "http://127.0.0.1:8265", "https://head:8265"
  std::string token;         // the bearer token
  std::string token_source;  // "/path/to/token", "ELASTRAIN_TOKEN": named in errors
};

// Where to send requests, and the token (rules above). Reads the token and URL files.
Result<ApiTarget> ResolveApiTarget(const ApiTargetArgs& args);
// The same URL for comparison: lower-case scheme and host, no trailing '/'.
std::string NormalizeUrl(std::string url);
// The URLs of a --head value "URL[,URL...]", blanks around each dropped, empty ones skipped.
std::vector<std::string> HeadUrls(const std::string& head);

// One request to the API ("GET" or "POST" with a JSON body), to each head of a list in turn
// until one answers (one that cannot be reached or answers Unavailable is passed over);
// its answer through DecodeApiAnswer, or Unavailable / InvalidArgument when it could not be asked (no
// answer, a certificate that does not verify). `ca_cert`: a PEM CA file for an https URL
// ("" : the system's CAs).
Result<nlohmann::json> CallApi(const ApiTarget& target, const std::string& ca_cert, const std::string& method,
                               const std::string& path, const nlohmann::json& body = nlohmann::json::object());

// What the CLI makes of an answer, never throwing, whatever the bytes (a proxy's HTML page,
// another program on the port, a head of another version):
// - HTTP 200 with JSON: the JSON;
// - HTTP 200 with anything else: Corruption "the head at URL answered METHOD PATH: not
//   JSON (...), starting '...'; expected ...";
// - an error code: the Status the server named in {"error": message}
//   (common/http_status.h), or, without one, the code and the start of the body.
// Every Corruption of these functions means "the answer could not be read": the job
// commands exit with kExitBadAnswer (wire/exit_codes.h) for it.
Result<nlohmann::json> DecodeApiAnswer(const ApiTarget& target, const std::string& method, const std::string& path,
                                       int http_status, std::string_view body);
// GET /api/v1/job's JSON as a JobStatus (wire/job_status.h): Corruption "the head at URL
// answered GET /api/v1/job: field '<path>': ...; expected a job status ..." when a field
// has the wrong type or a key that identifies a status is missing.
Result<JobStatus> DecodeJobStatus(const ApiTarget& target, const nlohmann::json& answer);
// POST /api/v1/jobs's JSON as a SubmittedJob, likewise.
Result<SubmittedJob> DecodeSubmittedJob(const ApiTarget& target, const nlohmann::json& answer);
// GET /api/v1/job, asked and decoded.
Result<JobStatus> GetJobStatus(const ApiTarget& target, const std::string& ca_cert);

// The CA file from --ca-cert, else $ELASTRAIN_CA_CERT, else "".
std::string CaCertFrom(const std::string& flag);

}  // namespace elastrain
