#include "core/close_matches.h"

#include <array>
#include <string_view>
#include "catch.h"  // last: see catch.h

using namespace libreyolo;

// Expected ratios are Python's difflib.SequenceMatcher(None, a, b).ratio().
TEST_CASE("similarity ratio equals difflib's", "[close_matches]") {
  CHECK(similarity_ratio("epoch", "epochs") == Approx(10.0 / 11.0));
  CHECK(similarity_ratio("abcd", "bcde") == Approx(0.75));
  CHECK(similarity_ratio("lr", "lr0") == Approx(0.8));
  CHECK(similarity_ratio("tide", "diet") == Approx(0.25));
  CHECK(similarity_ratio("diet", "tide") == Approx(0.5));
  CHECK(similarity_ratio("imgsize", "imgsz") == Approx(10.0 / 12.0));
  CHECK(similarity_ratio("", "") == Approx(1.0));
  CHECK(similarity_ratio("abc", "") == Approx(0.0));
}

TEST_CASE("close matches are the best ones above the cutoff, best first", "[close_matches]") {
  constexpr std::array<std::string_view, 6> keys{"epochs", "batch", "imgsz", "workers", "warmup_epochs", "eval_interval"};
  const auto matches = close_matches("epoch", keys);
  REQUIRE_FALSE(matches.empty());
  CHECK(matches.front() == "epochs");
  CHECK(close_matches("imgsize", keys).front() == "imgsz");
  CHECK(close_matches("zzzz", keys).empty());
  CHECK(close_matches("e", keys, 3, 0.0).size() == 3);
}
