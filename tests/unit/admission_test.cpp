// What an agent admits (elastic/admission.h): launched programs only from --allow-program,
// the paths a job sets only inside --allow-path, compared resolved (links and `..`).
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "config/config.h"
#include "elastic/admission.h"
#include "test_dirs.h"

namespace elastrain {
namespace {

namespace fs = std::filesystem;

struct Dirs {
  ScopedTempDir tmp{"admission"};
  std::string root, allowed, outside, bin, prog;
  Dirs() {
    root = fs::canonical(tmp.path()).string();
    allowed = root + "/allowed";
    outside = root + "/outside";
    bin = root + "/bin";
    for (const std::string& d : {allowed, outside, bin}) fs::create_directories(d);
    prog = bin + "/train.sh";
    std::ofstream(prog) << "#!/bin/sh\n";
    ::chmod(prog.c_str(), 0755);
  }
  Admission Rules(std::vector<std::string> programs = {}) const {
    return Admission{"h1", std::move(programs), {allowed}};
  }
};

TrainConfig Launching(const std::string& program) {
  TrainConfig c;
  c.launch_program = "[\"" + program + "\", \"--steps\", \"3\"]";
  return c;
}

TEST(Admission, WithoutAllowProgramOnlyTheTrainerRuns) {
  Dirs d;
  EXPECT_TRUE(AdmitJob(d.Rules(), TrainConfig()).ok()) << "the built-in trainer";
  const Status st = AdmitJob(d.Rules(), Launching(d.prog));
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("agent h1 runs only elastrain's own trainer"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("--allow-program"), std::string::npos) << st.message();
}

TEST(Admission, AProgramOrADirectoryOfThemIsAllowed) {
  Dirs d;
  EXPECT_TRUE(AdmitJob(d.Rules({d.prog}), Launching(d.prog)).ok());
  EXPECT_TRUE(AdmitJob(d.Rules({d.bin}), Launching(d.prog)).ok());
  // Reached through a link or `..`: the same program.
  fs::create_symlink(d.prog, d.outside + "/link.sh");
  EXPECT_TRUE(AdmitJob(d.Rules({d.bin}), Launching(d.outside + "/link.sh")).ok());
  EXPECT_TRUE(AdmitJob(d.Rules({d.prog}), Launching(d.outside + "/../bin/train.sh")).ok());
  // Another program, in a directory not allowed.
  const std::string other = d.outside + "/evil.sh";
  std::ofstream(other) << "#!/bin/sh\n";
  ::chmod(other.c_str(), 0755);
  const Status st = AdmitJob(d.Rules({d.bin}), Launching(other));
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("does not allow launch_program " + other), std::string::npos) << st.message();
  // A link inside the allowed directory to a program outside it is what it points to.
  fs::create_symlink(other, d.bin + "/sneaky.sh");
  EXPECT_EQ(AdmitJob(d.Rules({d.bin}), Launching(d.bin + "/sneaky.sh")).code(), StatusCode::kPermissionDenied);
  // A program allowed by name is not its directory's neighbours.
  EXPECT_EQ(AdmitJob(d.Rules({d.prog}), Launching(other)).code(), StatusCode::kPermissionDenied);
}

TEST(Admission, DataPathsStayInTheAllowedDirectories) {
  Dirs d;
  TrainConfig c;
  c.dataset_path = d.allowed + "/corpus.txt";  // need not exist yet
  c.final_params_path = d.allowed + "/out/params.bin";
  EXPECT_TRUE(AdmitJob(d.Rules(), c).ok());
  for (const std::string& escape : {d.outside + "/x", d.allowed + "/../outside/x", std::string("/etc/passwd"),
                                    d.allowed + "Sibling/x"}) {
    c.dataset_path = escape;
    const Status st = AdmitJob(d.Rules(), c);
    EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << escape;
    EXPECT_NE(st.message().find("refuses dataset_path=" + escape), std::string::npos) << st.message();
  }
  c.dataset_path.clear();
  // A link inside the allowed directory that leads out.
  fs::create_symlink(d.outside, d.allowed + "/out-link");
  c.load_parameters_path = d.allowed + "/out-link/weights.bin";
  const Status st = AdmitJob(d.Rules(), c);
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find(d.outside + "/weights.bin"), std::string::npos) << "names where it leads: " << st.message();
}

TEST(Admission, EveryPathOfABlendAndEveryGlobStaysInTheAllowedDirectories) {
  Dirs d;
  TrainConfig c;
  c.dataset_path = "0.7 " + d.allowed + "/a.bin 0.3 " + d.allowed + "/shards/*.bin";
  EXPECT_TRUE(AdmitJob(d.Rules(), c).ok()) << AdmitJob(d.Rules(), c).message();
  for (const std::string& escape : {"0.7 " + d.allowed + "/a.bin 0.3 " + d.outside + "/b.bin",
                                    d.allowed + "/../outside/*.bin", "1 " + d.allowed + "/*/../../outside/x.bin"}) {
    c.dataset_path = escape;
    EXPECT_EQ(AdmitJob(d.Rules(), c).code(), StatusCode::kPermissionDenied) << escape;
  }
}

TEST(Admission, TheRunDirectoryIsTheAgentsCheck) {
  Dirs d;
  EXPECT_TRUE(AdmitPath(d.Rules(), "the run directory", d.allowed + "/runs/job").ok());
  const Status st = AdmitPath(d.Rules(), "the run directory", "/root/.ssh");
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("--allow-path"), std::string::npos) << st.message();
}

TEST(Admission, TheFlagsMustNameWhatExists) {
  Dirs d;
  EXPECT_FALSE(ResolveAllowList({d.root + "/nope"}, "--allow-program", false).ok());
  auto file_as_dir = ResolveAllowList({d.prog}, "--allow-path", true);
  ASSERT_FALSE(file_as_dir.ok());
  EXPECT_NE(file_as_dir.status().message().find("expected a directory"), std::string::npos);
  auto ok = ResolveAllowList({d.bin + "/../bin/"}, "--allow-path", true);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok.value().at(0), d.bin);
}

}  // namespace
}  // namespace elastrain
