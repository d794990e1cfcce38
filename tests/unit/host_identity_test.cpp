// elastic/host_identity.h: an agent's id, host name, address and slots from its flags,
// Kubernetes' downward API or Slurm's environment, and the address of the route to the store.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "elastic/host_identity.h"

namespace elastrain {
namespace {

using ::testing::HasSubstr;

struct FakeEnv {
  std::map<std::string, std::string> vars;
  EnvLookup Lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

HostIdentity Flags(int slots = 2) {
  HostIdentity f;
  f.slots = slots;
  return f;
}

void ExpectIdentity(const Result<HostIdentity>& got, const std::string& id, const std::string& host,
                    const std::string& address, int slots) {
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->id, id);
  EXPECT_EQ(got->host, host);
  EXPECT_EQ(got->address, address);
  EXPECT_EQ(got->slots, slots);
}

TEST(HostIdentity, FlagsOnlyLeaveDefaultsToTheAgent) {
  FakeEnv env;
  auto id = ResolveHostIdentity(Flags(), env.Lookup());
  ExpectIdentity(id, "", "", "", 2);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->learned_from, "");
}

TEST(HostIdentity, KubernetesDownwardApi) {
  FakeEnv env{{{"POD_NAME", "elastrain-agent-1"}, {"NODE_NAME", "gke-spot-pool-a1b2"}, {"POD_IP", "10.4.2.7"},
               {"SLURMD_NODENAME", "ignored"}}};
  auto id = ResolveHostIdentity(Flags(), env.Lookup());
  ExpectIdentity(id, "elastrain-agent-1", "gke-spot-pool-a1b2", "10.4.2.7", 2);
  ASSERT_TRUE(id.ok());
  EXPECT_THAT(id->learned_from, HasSubstr("Kubernetes"));
  EXPECT_THAT(id->learned_from, HasSubstr("POD_NAME"));
}

TEST(HostIdentity, SlurmNodeJobAndStep) {
  FakeEnv env{{{"SLURMD_NODENAME", "n2"}, {"SLURM_JOB_ID", "41"}, {"SLURM_STEP_ID", "3"},
               {"SLURM_GPUS_ON_NODE", "8"}}};
  auto id = ResolveHostIdentity(Flags(0), env.Lookup());
  ExpectIdentity(id, "n2-41.3", "n2", "", 8);  // the address: the route to the store tells
  ASSERT_TRUE(id.ok());
  EXPECT_THAT(id->learned_from, HasSubstr("Slurm"));
}

TEST(HostIdentity, FlagsWinOverTheEnvironment) {
  FakeEnv env{{{"POD_NAME", "p"}, {"NODE_NAME", "n"}, {"POD_IP", "10.0.0.1"}, {"SLURM_GPUS_ON_NODE", "8"}}};
  HostIdentity f = Flags(3);
  f.id = "a1";
  f.host = "h1";
  f.address = "192.168.1.5";
  auto id = ResolveHostIdentity(f, env.Lookup());
  ExpectIdentity(id, "a1", "h1", "192.168.1.5", 3);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->learned_from, "");
}

TEST(HostIdentity, SlotsAreRequiredWithoutSlurmGpus) {
  FakeEnv env;
  auto id = ResolveHostIdentity(Flags(0), env.Lookup());
  ASSERT_FALSE(id.ok());
  EXPECT_THAT(id.status().message(), HasSubstr("--slots"));
}

TEST(HostIdentity, HostileValuesAreRefusedNamingTheirSource) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"POD_NAME", "../../etc"}, {"POD_NAME", "a/b"},        {"NODE_NAME", "n\nINJECTED"},
      {"POD_IP", "10.0.0.1; rm"}, {"POD_IP", "example.com"}, {"SLURM_GPUS_ON_NODE", "8x"},
  };
  for (const auto& [var, value] : bad) {
    FakeEnv env{{{var, value}}};
    auto id = ResolveHostIdentity(Flags(var == "SLURM_GPUS_ON_NODE" ? 0 : 2), env.Lookup());
    ASSERT_FALSE(id.ok()) << var << "=" << value;
    EXPECT_THAT(id.status().message(), HasSubstr(var));
  }
  FakeEnv env{{{"SLURMD_NODENAME", "n1"}, {"SLURM_JOB_ID", "4/../x"}}};
  EXPECT_FALSE(ResolveHostIdentity(Flags(), env.Lookup()).ok());
  FakeEnv zero{{{"SLURM_GPUS_ON_NODE", "0"}}};
  EXPECT_FALSE(ResolveHostIdentity(Flags(0), zero.Lookup()).ok());
  FakeEnv huge{{{"NODE_NAME", std::string(254, 'a')}}};
  EXPECT_FALSE(ResolveHostIdentity(Flags(), huge.Lookup()).ok());
}

TEST(HostIdentity, LocalAddressTowardLoopbackIsLoopback) {
  auto a = LocalAddressToward("127.0.0.1", 2379);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a.value(), "127.0.0.1");
  // A name with an IPv4 address gets the IPv4 route even where it also resolves to ::1.
  auto named = LocalAddressToward("localhost", 2379);
  ASSERT_TRUE(named.ok()) << named.status().message();
  EXPECT_EQ(named.value(), "127.0.0.1");
  auto six = LocalAddressToward("::1", 2379);
  if (six.ok()) {
    EXPECT_EQ(six.value(), "::1");  // where the host has IPv6 at all
  }
  auto none = LocalAddressToward("no-such-host.invalid", 2379);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("--address"));
}

}  // namespace
}  // namespace elastrain
