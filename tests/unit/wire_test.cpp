// The wire vocabulary: typed values that travel as strings, parsed once, hostile text refused.
#include <gtest/gtest.h>

#include "wire/protocol.h"
#include "wire/rendezvous.h"

namespace elastrain {
namespace {

TEST(Rendezvous, ParsesBothKindsAndPrintsThemBack) {
  auto f = RendezvousAddress::Parse("file:/run/rendezvous/j1");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->kind, RendezvousAddress::Kind::kFile);
  EXPECT_EQ(f->dir, "/run/rendezvous/j1");
  EXPECT_EQ(f->ToString(), "file:/run/rendezvous/j1");

  auto e = RendezvousAddress::Parse("etcd://10.0.0.1:2379/elastrain/rdzv/j1");
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->kind, RendezvousAddress::Kind::kEtcd);
  EXPECT_EQ(e->store_url, "etcd://10.0.0.1:2379");
  EXPECT_EQ(e->prefix, "elastrain/rdzv/j1");
  EXPECT_EQ(e->ToString(), "etcd://10.0.0.1:2379/elastrain/rdzv/j1");
  EXPECT_EQ(RendezvousAddress::Parse("etcd://h:1")->prefix, "");
}

TEST(Rendezvous, EtcdOverTlsKeepsItsScheme) {
  auto e = RendezvousAddress::Parse("etcds://etcd.example:2379/elastrain/rdzv/j1");
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->kind, RendezvousAddress::Kind::kEtcd);
  EXPECT_EQ(e->store_url, "etcds://etcd.example:2379");
  EXPECT_EQ(e->prefix, "elastrain/rdzv/j1");
  EXPECT_EQ(e->ToString(), "etcds://etcd.example:2379/elastrain/rdzv/j1");
  EXPECT_FALSE(RendezvousAddress::Parse("etcds:///x").ok());
  EXPECT_FALSE(RendezvousAddress::Parse("etcds://").ok());
  EXPECT_TRUE(IsEtcdRendezvousUrl("etcd://h:1"));
  EXPECT_TRUE(IsEtcdRendezvousUrl("etcds://h:1"));
  EXPECT_FALSE(IsEtcdRendezvousUrl("memory://"));
}

// The store scopes its revision reads and watches to elastrain's keys, which an etcd
// role may be limited to; the CLI and the worker pass keys::kRoot as that scope.
TEST(Rendezvous, RendezvousKeysLieUnderTheStoreScope) {
  EXPECT_EQ(keys::Rendezvous("j1").rfind(keys::kRoot, 0), 0u);
}

TEST(Rendezvous, RefusesWhatIsNotAnAddress) {
  for (const char* bad : {"", "file:", "etcd://", "etcd:///prefix", "http://h:1/x", "FILE:/x", "/tmp/dir"}) {
    auto r = RendezvousAddress::Parse(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("expected file:<dir> or etcd[s]://host:port/<prefix>"), std::string::npos);
  }
  // A huge value is named, not echoed whole.
  auto r = RendezvousAddress::Parse(std::string(100000, 'x'));
  ASSERT_FALSE(r.ok());
  EXPECT_LT(r.status().message().size(), 400u);
}

TEST(Rendezvous, TravelsInThePlanAsOneString) {
  Plan p;
  p.rendezvous = RendezvousAddress::Etcd("etcd://h:2379", "elastrain/rdzv/j");
  const std::string text = ToJson(p);
  EXPECT_NE(text.find(R"("rendezvous":"etcd://h:2379/elastrain/rdzv/j")"), std::string::npos) << text;
  Plan back;
  ASSERT_TRUE(FromJson(text, &back).ok());
  EXPECT_EQ(back.rendezvous, p.rendezvous);
  Status st = FromJson(R"({"generation":1,"rendezvous":"gopher://x"})", &back);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("generation plan"), std::string::npos) << st.message();
  EXPECT_FALSE(FromJson(R"({"generation":1,"rendezvous":["file:/x"]})", &back).ok());
}

}  // namespace
}  // namespace elastrain
