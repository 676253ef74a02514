#include "daemon/list_page.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "cache/memory_store.h"
#include "common/sha256.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using kiln::v1::ListRequest;

class ListPageTest : public ::testing::Test {
 protected:
  // key, graph name, object bytes, created = last use (Unix ms).
  void Put(const std::string& key, const std::string& graph, int bytes, int64_t created_ms) {
    const std::string blob(bytes, static_cast<char>('a' + store_.Totals()->entries));
    kiln::v1::ArtifactMetadata metadata;
    metadata.set_key(key);
    metadata.set_graph_name(graph);
    metadata.set_digest(Sha256Hex(blob));
    metadata.set_object_bytes(bytes);
    metadata.set_created_unix_ms(created_ms);
    metadata.mutable_toolchain()->set_cpu("znver5");  // what a brief page drops
    metadata.mutable_signature()->add_symbols("s0");
    metadata.mutable_guards()->add_inputs();
    metadata.mutable_key_components()->set_graph("g");
    ASSERT_TRUE(store_.Put(metadata, blob).ok());
  }

  // Every page, as "key/last use/pinned" lines with "--" between pages.
  std::string AllPages(ListRequest request) {
    std::string out;
    while (true) {
      auto page = ListPage(store_, last_touched_, request);
      if (!page.ok()) return page.status().ToString();
      for (int i = 0; i < page->entries_size(); ++i) {
        absl::StrAppend(&out, page->entries(i).key(), "/", page->uses(i).last_use_unix_ms(),
                        page->uses(i).pinned() ? "/pinned" : "", " ");
      }
      if (page->next_page_token().empty()) return out;
      absl::StrAppend(&out, "-- ");
      request.set_page_token(page->next_page_token());
    }
  }

  MemoryStore store_;
  std::map<std::string, absl::Time> touched_;
  LastTouchedFn last_touched_ = [this](const std::string& key) -> std::optional<absl::Time> {
    auto it = touched_.find(key);
    if (it == touched_.end()) return std::nullopt;
    return it->second;
  };
};

TEST_F(ListPageTest, KeyOrderPagesWithoutAnEmptyLastPage) {
  Put("k3", "mlp", 30, 3000);
  Put("k1", "mlp", 10, 1000);
  Put("k2", "attention", 20, 2000);
  Put("k4", "mlp", 40, 4000);
  ASSERT_TRUE(store_.SetPinned("k2", true).ok());
  // Full entries come from the metadata, brief ones from the usage records.
  for (bool brief : {false, true}) {
    SCOPED_TRACE(brief ? "brief" : "full");
    ListRequest request;
    request.set_brief(brief);
    request.set_page_size(2);
    EXPECT_EQ(AllPages(request), "k1/1000 k2/2000/pinned -- k3/3000 k4/4000 ");
    request.set_page_size(3);
    EXPECT_EQ(AllPages(request), "k1/1000 k2/2000/pinned k3/3000 -- k4/4000 ");
    request.set_page_size(0);
    EXPECT_EQ(AllPages(request), "k1/1000 k2/2000/pinned k3/3000 k4/4000 ");
    request.set_graph_substring("ml");
    request.set_page_size(2);
    EXPECT_EQ(AllPages(request), "k1/1000 k3/3000 -- k4/4000 ");
    request.set_page_size(3);
    EXPECT_EQ(AllPages(request), "k1/1000 k3/3000 k4/4000 ");
  }
}

TEST_F(ListPageTest, LastUseOrderCountsLocalIndexHitsAndPagesByCursor) {
  Put("k1", "a", 10, 1000);
  Put("k2", "b", 20, 2000);
  Put("k3", "c", 30, 3000);
  Put("k4", "d", 40, 3000);  // ties k3: key order breaks it
  ASSERT_TRUE(store_.RecordUse("k1", absl::FromUnixMillis(5000)).ok());
  touched_["k2"] = absl::FromUnixMillis(6000);  // a local-index hit, newer
  touched_["k3"] = absl::FromUnixMillis(10);    // older than the store's record: ignored
  ListRequest request;
  request.set_order(ListRequest::ORDER_LAST_USE);
  request.set_page_size(3);
  EXPECT_EQ(AllPages(request), "k2/6000 k1/5000 k3/3000 -- k4/3000 ");
  request.set_reverse(true);
  request.set_page_size(1);
  EXPECT_EQ(AllPages(request), "k3/3000 -- k4/3000 -- k1/5000 -- k2/6000 ");
  auto first = ListPage(store_, last_touched_, request);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->next_page_token(), "3000:k3");
}

TEST_F(ListPageTest, SizeOrderAndFilterAndAnEntryEvictedBetweenPages) {
  Put("k1", "mlp", 10, 1000);
  Put("k2", "attention", 20, 2000);
  Put("k3", "mlp", 30, 3000);
  Put("k4", "mlp_big", 40, 4000);
  ListRequest request;
  request.set_order(ListRequest::ORDER_SIZE);
  request.set_page_size(2);
  auto first = ListPage(store_, last_touched_, request);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->next_page_token(), "30:k3");
  ASSERT_TRUE(store_.Evict("k3").ok());  // the page's last entry goes
  request.set_page_token(first->next_page_token());
  EXPECT_EQ(AllPages(request), "k2/2000 k1/1000 ");
  request.clear_page_token();
  request.set_graph_substring("mlp");
  EXPECT_EQ(AllPages(request), "k4/4000 k1/1000 ");
}

// A brief page (kiln ls's table) drops what only `kiln show` needs.
TEST_F(ListPageTest, BriefEntriesKeepWhatATableShows) {
  Put("k1", "mlp", 10, 1000);
  kiln::v1::ListRequest request;
  auto full = ListPage(store_, last_touched_, request);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->entries(0).toolchain().cpu(), "znver5");
  request.set_brief(true);
  for (auto order : {kiln::v1::ListRequest::ORDER_KEY, kiln::v1::ListRequest::ORDER_SIZE}) {
    request.set_order(order);
    auto page = ListPage(store_, last_touched_, request);
    ASSERT_TRUE(page.ok()) << page.status();
    ASSERT_EQ(page->entries_size(), 1);
    const kiln::v1::ArtifactMetadata& entry = page->entries(0);
    EXPECT_EQ(entry.key(), "k1");
    EXPECT_EQ(entry.graph_name(), "mlp");
    EXPECT_EQ(entry.object_bytes(), 10);
    EXPECT_EQ(entry.created_unix_ms(), 1000);
    EXPECT_FALSE(entry.has_toolchain());
    EXPECT_FALSE(entry.has_signature());
    EXPECT_FALSE(entry.has_guards());
    EXPECT_FALSE(entry.has_key_components());
  }
}

// A table's records hold only what the table shows: the key's first 16
// digits, no digest, no source graph.
TEST_F(ListPageTest, TableEntriesHoldOnlyWhatTheTableShows) {
  const std::string key(64, 'a');
  Put(key, "mlp", 10, 1000);
  kiln::v1::ListRequest request;
  request.set_brief(true);
  auto brief = ListPage(store_, last_touched_, request);
  ASSERT_TRUE(brief.ok()) << brief.status();
  ASSERT_EQ(brief->entries_size(), 1);
  EXPECT_EQ(brief->entries(0).key(), key);
  EXPECT_FALSE(brief->entries(0).digest().empty());
  request.set_table(true);
  auto table = ListPage(store_, last_touched_, request);
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ(table->entries_size(), 1);
  const kiln::v1::ArtifactMetadata& entry = table->entries(0);
  EXPECT_EQ(entry.key(), std::string(16, 'a'));
  EXPECT_EQ(entry.digest(), "");
  EXPECT_EQ(entry.source_graph(), "");
  EXPECT_EQ(entry.graph_name(), "mlp");
  EXPECT_EQ(entry.object_bytes(), 10);
  EXPECT_EQ(entry.created_unix_ms(), 1000);
}

TEST_F(ListPageTest, RefusesBadRequestsNamingTheField) {
  ListRequest request;
  request.set_page_size(-1);
  EXPECT_EQ(ListPage(store_, last_touched_, request).status(),
            absl::InvalidArgumentError("page_size -1 is negative; 0 means the default"));
  request.set_page_size(0);
  request.set_order(ListRequest::ORDER_LAST_USE);
  request.set_page_token("k1");
  EXPECT_EQ(ListPage(store_, last_touched_, request).status(),
            absl::InvalidArgumentError(
                "page_token 'k1' is not one this order returned: pass the next_page_token of "
                "the previous page, with the same order"));
  request.clear_page_token();
  request.set_order(ListRequest::ORDER_KEY);
  request.set_reverse(true);
  EXPECT_EQ(ListPage(store_, last_touched_, request).status(),
            absl::InvalidArgumentError(
                "reverse applies to ORDER_LAST_USE and ORDER_SIZE, not to key order"));
}

}  // namespace
}  // namespace kiln
